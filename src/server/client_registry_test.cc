// ClientRegistry: ids, registration, names, slots and the client-memory budget.
#include "server/client_registry.h"

#include <gtest/gtest.h>

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
  std::vector<uint64_t> ids;
  EXPECT_TRUE(r.PickEvictions(1300, 0, &ids));  // 1300 held: fits, nobody goes
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(r.PickEvictions(1000, 0, &ids));  // b (400) goes: 900 left
  EXPECT_EQ(ids, std::vector<uint64_t>({b.id}));
  ids.clear();
  EXPECT_TRUE(r.PickEvictions(1000, 0, &ids));  // b still counted as gone
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(r.PickEvictions(900, 200, &ids));  // room for 200 more: c (300) goes
  EXPECT_EQ(ids, std::vector<uint64_t>({c.id}));
  ids.clear();
  EXPECT_FALSE(r.PickEvictions(500, 100, &ids));  // a growth that cannot fit: nobody goes
  EXPECT_TRUE(ids.empty());
  EXPECT_FALSE(r.PickEvictions(400, 0, &ids));  // past the limit: a goes, d alone is too much
  EXPECT_EQ(ids, std::vector<uint64_t>({a.id}));
  // Gone for real: the registry forgets them; their memory is released.
  for (net::ClientInfo* x : {&a, &b, &c}) {
    r.Unregister(x);
    r.AdjustMemory(-static_cast<int64_t>(x->tot_mem.load()));
  }
  ids.clear();
  EXPECT_TRUE(r.PickEvictions(500, 0, &ids));
  EXPECT_TRUE(ids.empty());
  d.no_evict.store(false);
  EXPECT_TRUE(r.PickEvictions(400, 0, &ids));
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
