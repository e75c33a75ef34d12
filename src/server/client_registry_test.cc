// ClientRegistry: ids, registration, names, slots and the client-memory budget.
#include "server/client_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "server/durability_gate.h"

namespace pion::server {
namespace {

TEST(ClientRegistry, RegisterFindAndName) {
  ClientRegistry r;
  net::ClientInfo a, b;
  a.id = r.NextId();
  b.id = r.NextId();
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(b.id, 2u);
  a.worker = 3;
  r.Register(&a);
  r.Register(&b);
  EXPECT_EQ(r.WorkerOf(a.id), 3);
  EXPECT_EQ(r.WorkerOf(99), -1);
  r.SetName(&b, "bee");
  EXPECT_EQ(r.Name(&b), "bee");
  std::vector<uint64_t> ids;
  r.ForEach([&](const net::ClientInfo& c) { ids.push_back(c.id); });
  EXPECT_EQ(ids.size(), 2u);
  r.Unregister(&a);
  EXPECT_EQ(r.WorkerOf(a.id), -1);
}

TEST(ClientRegistry, SlotsStopAtTheLimit) {
  ClientRegistry r;
  EXPECT_TRUE(r.TryAcquireSlot(2));
  EXPECT_TRUE(r.TryAcquireSlot(2));
  EXPECT_FALSE(r.TryAcquireSlot(2));
  EXPECT_EQ(r.connected(), 2u);
  r.ReleaseSlot();
  EXPECT_TRUE(r.TryAcquireSlot(2));
}

TEST(ClientRegistry, MemoryBudget) {
  ClientRegistry r;
  EXPECT_TRUE(r.ReserveMemory(60, 100));
  EXPECT_FALSE(r.ReserveMemory(41, 100));  // nothing counted on refusal
  EXPECT_EQ(r.memory(), 60u);
  EXPECT_TRUE(r.ReserveMemory(1000, 0));  // 0 = no limit
  r.AdjustMemory(-2000);
  EXPECT_EQ(r.memory(), 0u);  // never reported below zero
}

// Client eviction picks the largest clients first, skips NO-EVICT ones, and
// counts a picked client as gone until it unregisters (it is not picked twice).
TEST(ClientRegistry, PickEvictionsLargestFirst) {
  ClientRegistry r;
  net::ClientInfo a, b, c, d;
  uint64_t sizes[] = {100, 400, 300, 500};
  net::ClientInfo* all[] = {&a, &b, &c, &d};
  for (int i = 0; i < 4; ++i) {
    all[i]->id = r.NextId();
    all[i]->tot_mem.store(sizes[i]);
    r.Register(all[i]);
    r.AdjustMemory(static_cast<int64_t>(sizes[i]));
  }
  d.no_evict.store(true);  // the largest, but exempt
  using E = ClientRegistry::Eviction;
  std::vector<uint64_t> ids;
  EXPECT_EQ(r.PickEvictions(1300, 0, 0, &ids), E::kFits);  // 1300 held: nobody goes
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(r.PickEvictions(1000, 0, 0, &ids), E::kFits);  // b (400) goes: 900 left
  EXPECT_EQ(ids, std::vector<uint64_t>({b.id}));
  ids.clear();
  EXPECT_EQ(r.PickEvictions(1000, 0, 0, &ids), E::kFits);  // b still counted as gone
  EXPECT_TRUE(ids.empty());
  std::vector<uint64_t> listed;  // and left out of CLIENT LIST
  r.ForEach([&](const net::ClientInfo& x) { listed.push_back(x.id); });
  EXPECT_EQ(listed.size(), 3u);
  EXPECT_EQ(std::count(listed.begin(), listed.end(), b.id), 0);
  // a asks for 150 more (900 + 150 held): c (300), now the largest evictable, goes.
  EXPECT_EQ(r.PickEvictions(900, 150, a.id, &ids), E::kFits);
  EXPECT_EQ(ids, std::vector<uint64_t>({c.id}));
  ids.clear();
  // a asks for 500 more: a (600 with it) is the largest, and goes with its growth.
  EXPECT_EQ(r.PickEvictions(700, 500, a.id, &ids), E::kRequesterPicked);
  EXPECT_EQ(ids, std::vector<uint64_t>({a.id}));
  ids.clear();
  // Gone for real: the registry forgets them; their memory is released.
  for (net::ClientInfo* x : {&a, &b, &c}) {
    r.Unregister(x);
    r.AdjustMemory(-static_cast<int64_t>(x->tot_mem.load()));
  }
  EXPECT_EQ(r.PickEvictions(400, 100, 0, &ids), E::kNoRoom);  // only d: nobody goes
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(r.PickEvictions(400, 0, 0, &ids), E::kNoRoom);  // past the limit, nobody evictable
  EXPECT_TRUE(ids.empty());
  d.no_evict.store(false);
  EXPECT_EQ(r.PickEvictions(400, 0, 0, &ids), E::kFits);
  EXPECT_EQ(ids, std::vector<uint64_t>({d.id}));
}

TEST(DurabilityGate, NeverMovesBack) {
  DurabilityGate g;
  EXPECT_EQ(g.durable_lsn(), 0u);
  g.NotifyDurable(5);
  g.NotifyDurable(3);
  EXPECT_EQ(g.durable_lsn(), 5u);
  g.NotifyDurable(9);
  EXPECT_EQ(g.durable_lsn(), 9u);
}

}  // namespace
}  // namespace pion::server
