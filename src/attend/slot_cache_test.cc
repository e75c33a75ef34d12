// SlotCache (LRU, limits, cold registry, drops), SlotArena (reuse of freed slot
// memory), the slot fill checks and ComputePool (tasks, nested ParallelFor) without
// the server.
#include "attend/slot_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "attend/compute_pool.h"
#include "attend/slot_arena.h"
#include "base/fp16.h"

namespace pion::attend {
namespace {

std::shared_ptr<const Slot> MakeSlot(uint32_t h, uint32_t n, uint32_t d, float v = 0.5f) {
  auto s = std::make_shared<Slot>();
  std::vector<float> k(static_cast<size_t>(h) * n * d, v), vv(k.size(), -v);
  EXPECT_TRUE(s->StoreF32(Precision::kF32, h, n, d, k.data(), vv.data()).ok());
  return s;
}

// A slot built in the cache's arena, K = v, V = -v everywhere.
std::shared_ptr<const Slot> ArenaSlot(SlotCache& c, uint32_t h, uint32_t n, uint32_t d,
                                      float v = 0.5f) {
  auto s = std::make_shared<Slot>(c.arena());
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

TEST(SlotCache, ColdAcquireStampsLastAccess) {
  SlotCache c({1, 0, 8});
  c.Put("s", 0, MakeSlot(1, 2, 4));
  c.Put("s", 1, MakeSlot(1, 2, 4));  // demotes layer 0
  EXPECT_LT(c.LastAccess("s", 0), c.LastAccess("s", 1));
  EXPECT_EQ(c.LastAccess("s", 2), 0u);
  SlotState st;
  EXPECT_EQ(c.Acquire("s", 0, &st), nullptr);  // the query that meets COLDMISS
  EXPECT_EQ(st, SlotState::kCold);
  EXPECT_GT(c.LastAccess("s", 0), c.LastAccess("s", 1));
  // The cold registry's order follows the stamp: layer 1 (demoted at stamp 2, before
  // layer 0's query) is forgotten first.
  c.Put("s", 2, MakeSlot(1, 2, 4));  // demotes layer 1
  c.SetLimits({1, 0, 1});
  EXPECT_EQ(c.State("s", 0), SlotState::kCold);
  EXPECT_EQ(c.State("s", 1), SlotState::kMissing);
}

TEST(SlotArena, FitReuseAndLimit) {
  SlotArena a(1 << 20);
  size_t c1 = 0, c2 = 0, c3 = 0;
  uint8_t* p1 = a.Allocate(100000, &c1);
  ASSERT_NE(p1, nullptr);
  EXPECT_GE(c1, 100000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p1) % 64, 0u);
  a.Release(p1, c1);
  EXPECT_EQ(a.Stats().kept_bytes, c1);
  uint8_t* p2 = a.Allocate(95000, &c2);  // within 1/8 below the kept capacity
  EXPECT_EQ(p2, p1);
  EXPECT_EQ(c2, c1);
  EXPECT_EQ(a.Stats().kept_bytes, 0u);
  uint8_t* p3 = a.Allocate(50000, &c3);  // c1 is more than 1/8 too big: fresh
  EXPECT_NE(p3, p1);
  SlotArenaStats s = a.Stats();
  EXPECT_EQ(s.reused, 1u);
  EXPECT_EQ(s.fresh, 2u);
  a.Release(p2, c2);
  a.Release(p3, c3);
  EXPECT_EQ(a.Stats().kept_bytes, c1 + c3);
  a.SetKeepLimit(c3);  // frees the largest first
  s = a.Stats();
  EXPECT_EQ(s.kept_bytes, c3);
  EXPECT_EQ(s.kept_buffers, 1u);
  // Beyond the limit a released buffer is freed, not kept.
  size_t c4 = 0;
  uint8_t* p4 = a.Allocate(200000, &c4);
  EXPECT_EQ(a.Stats().kept_bytes, 0u);  // room for the fresh buffer: c3 freed
  a.Release(p4, c4);
  EXPECT_EQ(a.Stats().kept_bytes, 0u);
  // Mapped buffers (>= kMapBytes) are page-sized and reused the same way.
  a.SetKeepLimit(8u << 20);
  size_t m1 = 0, m2 = 0;
  uint8_t* q1 = a.Allocate(SlotArena::kMapBytes + 100, &m1);
  ASSERT_NE(q1, nullptr);
  EXPECT_EQ(m1 % 4096, 0u);
  q1[0] = 1;
  q1[m1 - 1] = 2;
  a.Release(q1, m1);
  uint8_t* q2 = a.Allocate(SlotArena::kMapBytes, &m2);
  EXPECT_EQ(q2, q1);
  EXPECT_EQ(q2[m1 - 1], 2);  // reused as it was (the slot zeroes its own padding)
  a.Release(q2, m2);
  // Just below kMapBytes, rounded up to 64 bytes it reaches it: mapped (freed by munmap).
  size_t e = 0;
  uint8_t* q3 = SlotArena::AllocateFresh(SlotArena::kMapBytes - 10, &e);
  ASSERT_NE(q3, nullptr);
  EXPECT_GE(e, SlotArena::kMapBytes);
  SlotArena::FreeBuffer(q3, e);
  a.Clear();
  EXPECT_EQ(a.Stats().kept_bytes, 0u);
}

TEST(SlotCache, ArenaReusesMemoryAfterDropAndDemotion) {
  SlotCache c({2, 0, 8});
  auto a = ArenaSlot(c, 2, 64, 16, 1.0f);
  const uint8_t* mem = a->data();
  const uint64_t b = a->bytes();
  c.Put("a", 0, a);
  a.reset();
  EXPECT_EQ(c.Drop("a", 0), 1u);
  EXPECT_EQ(c.Stats().arena.kept_bytes, b);  // the freed slot is kept
  auto r = ArenaSlot(c, 2, 64, 16, 3.0f);
  EXPECT_EQ(r->data(), mem);  // and reused
  EXPECT_EQ(r->bytes(), b);
  EXPECT_FLOAT_EQ(r->KAt(1, 63, 15), 3.0f);
  EXPECT_FLOAT_EQ(r->VAt(0, 0, 0), -3.0f);
  c.Put("r", 0, r);
  EXPECT_EQ(c.Stats().bytes, b);
  EXPECT_EQ(c.Stats().arena.kept_bytes, 0u);
  // Demotion hands the memory back the same way.
  c.Put("x", 0, ArenaSlot(c, 2, 64, 16));
  c.Put("y", 0, ArenaSlot(c, 2, 64, 16));  // demotes r
  EXPECT_EQ(c.State("r", 0), SlotState::kCold);
  SlotCacheStats s = c.Stats();
  EXPECT_EQ(s.bytes, 2 * b);
  EXPECT_EQ(s.arena.kept_bytes, 0u);  // r is still held here
  const uint8_t* rmem = r->data();
  r.reset();
  EXPECT_EQ(c.Stats().arena.kept_bytes, b);
  auto again = ArenaSlot(c, 2, 64, 16, 5.0f);
  EXPECT_EQ(again->data(), rmem);
  EXPECT_FLOAT_EQ(again->KAt(0, 10, 3), 5.0f);
  EXPECT_GE(c.Stats().arena.reused, 2u);
}

TEST(SlotCache, ArenaNeverReusesWhatAReaderHolds) {
  SlotCache c;
  c.Put("s", 0, ArenaSlot(c, 1, 32, 8, 1.0f));
  std::shared_ptr<const Slot> held = c.Acquire("s", 0, nullptr);
  EXPECT_EQ(c.Drop("s", 0), 1u);
  auto fresh = ArenaSlot(c, 1, 32, 8, 2.0f);  // same size, but the held one is busy
  EXPECT_NE(fresh->data(), held->data());
  EXPECT_FLOAT_EQ(held->KAt(0, 31, 7), 1.0f);
  EXPECT_FLOAT_EQ(fresh->KAt(0, 31, 7), 2.0f);
  const uint8_t* mem = held->data();
  held.reset();  // the last reader: now the memory may go round again
  auto next = ArenaSlot(c, 1, 32, 8, 4.0f);
  EXPECT_EQ(next->data(), mem);
}

TEST(SlotCache, ArenaWithinAttendMaxmemory) {
  const uint64_t b = MakeSlot(2, 64, 16)->bytes();
  SlotCache c({100, 3 * b, 8});
  auto check = [&] {
    SlotCacheStats s = c.Stats();
    EXPECT_LE(s.bytes + s.arena.kept_bytes, 3 * b);
  };
  for (uint32_t l = 0; l < 3; ++l) c.Put("s", l, ArenaSlot(c, 2, 64, 16));
  check();
  EXPECT_EQ(c.Drop("s", std::nullopt), 3u);
  EXPECT_EQ(c.Stats().arena.kept_bytes, 3 * b);
  check();
  c.Put("t", 0, ArenaSlot(c, 2, 64, 16));
  c.Put("t", 1, ArenaSlot(c, 2, 64, 16));
  check();
  EXPECT_EQ(c.Stats().arena.kept_bytes, b);
  EXPECT_EQ(c.Stats().arena.reused, 2u);
  c.SetLimits({100, 2 * b, 8});  // lowering the bound frees kept memory first
  check();
  EXPECT_EQ(c.Stats().arena.kept_bytes, 0u);
  EXPECT_LE(c.Stats().bytes, 2 * b);
  // FLUSHALL: nothing kept, also not a slot a query still held across it.
  c.Put("h", 0, ArenaSlot(c, 2, 64, 16));
  std::shared_ptr<const Slot> held = c.Acquire("h", 0, nullptr);
  c.Clear();
  EXPECT_EQ(c.Stats().arena.kept_bytes, 0u);
  held.reset();
  EXPECT_EQ(c.Stats().arena.kept_bytes, 0u);
  // Unbounded: kept at most the peak warm bytes.
  SlotCache u({100, 0, 8});
  for (uint32_t l = 0; l < 2; ++l) u.Put("s", l, ArenaSlot(u, 2, 64, 16));
  u.Drop("s", std::nullopt);
  EXPECT_EQ(u.Stats().arena.kept_bytes, 2 * b);
  EXPECT_EQ(u.Stats().arena.keep_limit, 2 * b);
  u.Clear();
  EXPECT_EQ(u.Stats().arena.kept_bytes, 0u);
}

// Readers, re-stores, drops and demotions at once on slots built in the shared arena:
// every slot a reader holds stays whole (all K = v, all V = -v for its own v), so no
// memory was reused while it was held.
TEST(SlotCache, ArenaReuseUnderConcurrentReadersAndRestores) {
  SlotCache c({3, 0, 16});
  constexpr int kThreads = 4, kIters = 150;
  constexpr uint32_t h = 2, n = 64, d = 16;
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        const float v = static_cast<float>(t * 1000 + i + 1);
        const uint32_t layer = static_cast<uint32_t>((t + i) % 5);
        c.Put("s", layer, ArenaSlot(c, h, n, d, v));
        std::shared_ptr<const Slot> r = c.Acquire("s", static_cast<uint32_t>(i % 5), nullptr);
        if (i % 7 == 0) c.Drop("s", static_cast<uint32_t>((i + 1) % 5));
        if (!r) continue;
        const float want = r->KAt(0, 0, 0);
        for (uint32_t hh = 0; hh < h; ++hh) {
          for (uint32_t x = 0; x < n; x += 7) {
            if (r->KAt(hh, x, d - 1) != want || r->VAt(hh, x, 0) != -want) ++bad;
          }
        }
        ++reads;
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  SlotCacheStats s = c.Stats();
  EXPECT_LE(s.warm, 3u);
  EXPECT_GT(s.arena.reused, 0u);
  EXPECT_LE(s.arena.kept_bytes, s.arena.keep_limit);
}

// The batch checks of StoreRows (vector pass, then a rescan for the error's place).
TEST(Slot, StoreRowsRejectsNonFiniteWhereItIs) {
  const uint32_t h = 4, d = 16, n = 40;
  std::vector<uint16_t> rows(static_cast<size_t>(n) * h * d, F32ToF16(0.25f));
  RowSpan span{reinterpret_cast<const uint8_t*>(rows.data()), n};
  for (Precision p : {Precision::kF16, Precision::kF32, Precision::kInt8}) {
    Slot s;
    ASSERT_TRUE(s.StoreRows(p, h, d, quant::Format::kFp16, {&span, 1}, {&span, 1}).ok());
    for (uint16_t bad : {uint16_t{0x7C00}, uint16_t{0xFE00}}) {  // +inf, NaN
      std::vector<uint16_t> v = rows;
      v[static_cast<size_t>(37) * h * d + 2 * d + 5] = bad;  // token 37, head 2
      RowSpan vs{reinterpret_cast<const uint8_t*>(v.data()), n};
      Status st = s.StoreRows(p, h, d, quant::Format::kFp16, {&span, 1}, {&vs, 1});
      ASSERT_FALSE(st.ok());
      EXPECT_NE(std::string(st.message()).find("V head 2 token 37"), std::string::npos)
          << st.message();
      EXPECT_FLOAT_EQ(s.VAt(2, 37, 5), 0.25f);  // the old contents stay
    }
  }
  // STORE from f32: beyond the f16 range in an f16 slot, and non-finite anywhere.
  std::vector<float> k(static_cast<size_t>(h) * n * d, 1.0f), v = k;
  Slot s;
  k[static_cast<size_t>(3) * n * d + 7 * d + 1] = 70000.0f;  // head 3 token 7
  Status st = s.StoreF32(Precision::kF16, h, n, d, k.data(), v.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("f16 range in K head 3 token 7"), std::string::npos);
  EXPECT_TRUE(s.StoreF32(Precision::kF32, h, n, d, k.data(), v.data()).ok());
  k[5] = std::numeric_limits<float>::quiet_NaN();
  st = s.StoreF32(Precision::kF32, h, n, d, k.data(), v.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("non-finite value in K head 0 token 0"),
            std::string::npos);
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
