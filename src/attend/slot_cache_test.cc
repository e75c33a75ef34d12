// SlotCache (LRU, limits, cold registry, drops) and ComputePool (tasks, nested
// ParallelFor) without the server.
#include "attend/slot_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "attend/compute_pool.h"

namespace pion::attend {
namespace {

std::shared_ptr<const Slot> MakeSlot(uint32_t h, uint32_t n, uint32_t d, float v = 0.5f) {
  auto s = std::make_shared<Slot>();
  std::vector<float> k(static_cast<size_t>(h) * n * d, v), vv(k.size(), -v);
  EXPECT_TRUE(s->StoreF32(Precision::kF32, h, n, d, k.data(), vv.data()).ok());
  return s;
}

TEST(SlotCache, StatesAndLruDemotion) {
  SlotCache c({/*max_slots=*/2, /*max_bytes=*/0, /*cold_slots=*/8});
  c.Put("a", 0, MakeSlot(1, 4, 8));
  c.Put("b", 0, MakeSlot(1, 4, 8));
  EXPECT_EQ(c.State("a", 0), SlotState::kWarm);
  SlotState st;
  ASSERT_NE(c.Acquire("a", 0, &st), nullptr);  // a is now the most recent
  c.Put("c", 0, MakeSlot(1, 4, 8));
  EXPECT_EQ(c.State("b", 0), SlotState::kCold);
  EXPECT_EQ(c.State("a", 0), SlotState::kWarm);
  EXPECT_EQ(c.State("z", 0), SlotState::kMissing);
  EXPECT_EQ(c.Acquire("b", 0, &st), nullptr);
  EXPECT_EQ(st, SlotState::kCold);
  auto ci = c.Cold("b", 0);
  ASSERT_TRUE(ci.has_value());
  EXPECT_EQ(ci->heads, 1u);
  EXPECT_EQ(ci->tokens, 4u);
  EXPECT_EQ(ci->dim, 8u);
  c.Put("b", 0, MakeSlot(1, 4, 8));  // rehydrate: demotes a (LRU now)
  SlotCacheStats s = c.Stats();
  EXPECT_EQ(s.warm, 2u);
  EXPECT_EQ(s.cold, 1u);
  EXPECT_EQ(s.demotions, 2u);
  EXPECT_EQ(s.rehydrates, 1u);
  EXPECT_EQ(c.State("a", 0), SlotState::kCold);
}

TEST(SlotCache, ColdRegistryForgetsOldest) {
  SlotCache c({1, 0, 2});
  for (int i = 0; i < 5; ++i) c.Put("s", i, MakeSlot(1, 1, 4));
  // warm: 4; cold: 3, 2 (0 and 1 forgotten)
  EXPECT_EQ(c.State("s", 4), SlotState::kWarm);
  EXPECT_EQ(c.State("s", 3), SlotState::kCold);
  EXPECT_EQ(c.State("s", 2), SlotState::kCold);
  EXPECT_EQ(c.State("s", 1), SlotState::kMissing);
  EXPECT_EQ(c.State("s", 0), SlotState::kMissing);
  EXPECT_EQ(c.Stats().cold_forgotten, 2u);
  c.SetLimits({1, 0, 0});  // no cold registry at all
  EXPECT_EQ(c.Stats().cold, 0u);
}

TEST(SlotCache, ByteBoundAndAdmit) {
  auto one = MakeSlot(2, 16, 8);
  const uint64_t b = one->bytes();
  SlotCache c({100, 2 * b + b / 2, 100});
  c.Put("x", 0, one);
  c.Put("x", 1, MakeSlot(2, 16, 8));
  EXPECT_EQ(c.Stats().warm, 2u);
  EXPECT_EQ(c.Stats().bytes, 2 * b);
  c.Put("x", 2, MakeSlot(2, 16, 8));
  EXPECT_EQ(c.Stats().warm, 2u);
  EXPECT_EQ(c.State("x", 0), SlotState::kCold);
  EXPECT_TRUE(c.Admit(b).ok());
  EXPECT_FALSE(c.Admit(3 * b).ok());
  // Shrinking the bound demotes at once.
  c.SetLimits({100, b, 100});
  EXPECT_EQ(c.Stats().warm, 1u);
  EXPECT_EQ(c.State("x", 2), SlotState::kWarm);  // the most recent stays
}

TEST(SlotCache, ReplaceKeepsReadersAlive) {
  SlotCache c;
  c.Put("s", 0, MakeSlot(1, 2, 4, 1.0f));
  std::shared_ptr<const Slot> held = c.Acquire("s", 0, nullptr);
  c.Put("s", 0, MakeSlot(1, 2, 4, 2.0f));
  EXPECT_EQ(c.Drop("s", 0), 1u);
  EXPECT_FLOAT_EQ(held->KAt(0, 1, 3), 1.0f);  // the old slot is still readable
  EXPECT_EQ(c.Stats().bytes, 0u);
}

TEST(SlotCache, DropLayerSidNamespaceAndClear) {
  SlotCache c({2, 0, 16});
  c.Put("ns", 0, MakeSlot(1, 1, 4));
  c.Put("ns", 1, MakeSlot(1, 1, 4));
  c.Put("ns_attn", 0, MakeSlot(1, 1, 4));  // demotes ns/0
  c.Put("nsx", 0, MakeSlot(1, 1, 4));      // demotes ns/1; not part of namespace ns
  EXPECT_EQ(c.Drop("ns", 7), 0u);
  EXPECT_EQ(c.DropNamespace("ns"), 3u);  // ns/0, ns/1 (cold), ns_attn/0
  EXPECT_EQ(c.State("nsx", 0), SlotState::kWarm);
  EXPECT_EQ(c.Drop("nsx", std::nullopt), 1u);
  c.Put("q", 0, MakeSlot(1, 1, 4));
  c.Clear();
  SlotCacheStats s = c.Stats();
  EXPECT_EQ(s.warm + s.cold + s.bytes, 0u);
}

TEST(ComputePool, TasksAndNestedParallelFor) {
  ComputePool pool(3, "t-attend");
  EXPECT_EQ(pool.concurrency(), 3u);
  constexpr int kTasks = 16;
  std::vector<std::promise<uint64_t>> done(kTasks);
  for (int t = 0; t < kTasks; ++t) {
    ASSERT_TRUE(pool.Post([&, t] {
      std::vector<uint64_t> part(37, 0);
      pool.ParallelFor(37, [&](uint32_t i) { part[i] = i + 1; });
      uint64_t s = 0;
      for (uint64_t v : part) s += v;
      done[t].set_value(s);
    }));
  }
  for (auto& p : done) EXPECT_EQ(p.get_future().get(), 37u * 38u / 2);
  std::atomic<int> n{0};
  pool.ParallelFor(5, [&](uint32_t) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 5);
  pool.Stop();
  EXPECT_FALSE(pool.Post([] {}));
  pool.ParallelFor(3, [&](uint32_t) { n.fetch_add(1); });  // inline after stop
  EXPECT_EQ(n.load(), 8);
}

TEST(ComputePool, ConcurrentParallelForFromOutside) {
  ComputePool pool(2, "t-attend");
  std::vector<std::thread> callers;
  std::atomic<uint64_t> total{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<uint32_t> hit(10, 0);
        pool.ParallelFor(10, [&](uint32_t i) { hit[i] += 1; });
        for (uint32_t h : hit) total.fetch_add(h);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4u * 50u * 10u);  // every index exactly once per call
}

}  // namespace
}  // namespace pion::attend
