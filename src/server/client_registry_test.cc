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
