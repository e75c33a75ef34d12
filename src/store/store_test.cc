// Store: registry semantics, row storage (gaps, overwrite, chunks), LRU order,
// byte budget, pins under concurrent drop/overwrite, the mutation seam and replay.
#include "store/store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include "base/clock.h"
#include "base/fp16.h"
#include "base/keyslot.h"
#include "store/block_ops.h"
#include "store/key_ops.h"
#include "store/prefix_ops.h"
#include "store/string_ops.h"

namespace pion::store {
namespace {

using quant::Format;

std::vector<uint16_t> HalfRows(uint64_t rows, uint32_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> v(rows * dim);
  for (auto& h : v) h = F32ToF16(nd(rng));
  return v;
}

RowInput F16In(const std::vector<uint16_t>& v) {
  return RowInput{RowInput::Type::kF16, v.data(), v.size() * 2};
}

// Concatenates the stored bytes of a plan (zeros for gaps).
std::vector<uint8_t> Gather(const FetchPlan& p) {
  std::vector<uint8_t> out;
  for (const auto& s : p.segments) {
    size_t n = s.rows * p.row_bytes;
    if (s.data) {
      out.insert(out.end(), s.data, s.data + n);
    } else {
      out.insert(out.end(), n, 0);
    }
  }
  return out;
}

// The rows of one captured snapshot layer, as a plan Gather reads (the views keep them pinned).
FetchPlan PlanOf(const persist::SnapshotNamespace::Layer& l, size_t row_bytes) {
  FetchPlan p;
  p.row_bytes = row_bytes;
  for (const persist::SnapshotSegment& seg : l.segments)
    p.segments.push_back({nullptr, seg.data, seg.rows});
  return p;
}

Status Reg(Store& st, std::string_view ns, uint32_t dim = 64, Format f = Format::kFp16) {
  RegisterArgs a;
  a.ns = ns;
  a.kv_dim = dim;
  a.fmt = f;
  uint64_t lsn;
  return OpRegister({st, &lsn}, a);
}

Status Put(Store& st, std::string_view sid, uint32_t layer, uint64_t start,
           const std::vector<uint16_t>& rows, uint32_t dim) {
  uint64_t lsn;
  return OpStoreRows({st, &lsn}, sid, layer, start, rows.size() / dim, F16In(rows));
}

TEST(Store, RegisterLookupDrop) {
  Store st({});
  EXPECT_FALSE(OpLookup({st}, "a").hit);
  ASSERT_TRUE(Reg(st, "a").ok());
  EXPECT_TRUE(OpLookup({st}, "a").hit);
  EXPECT_TRUE(Reg(st, "a").ok());  // same dim/format: fine
  Status bad = Reg(st, "a", 128);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message(), "namespace already registered with kv_dim 64 vquant fp16");
  EXPECT_TRUE(Reg(st, "c", 100, Format::kInt8).ok());
  std::string_view names[] = {"a", "zz", "c", "a"};
  uint64_t lsn;
  auto n = OpDrop({st, &lsn}, names);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_FALSE(OpLookup({st}, "a").hit);
  EXPECT_EQ(st.NamespaceCount(), 0u);
}

TEST(Store, PrefillAndBlocks) {
  Store st({});
  auto t = std::make_shared<BlockTable>();
  t->block_size = 16;
  t->hashes = {5, 3, 9};
  RegisterArgs a{"ns", 64, Format::kFp16, t, true, 1200000};
  uint64_t lsn;
  ASSERT_TRUE(OpRegister({st, &lsn}, a).ok());
  auto lr = OpLookup({st}, "ns");
  EXPECT_EQ(lr.prefill_us, 1200000u);
  auto b = OpBlocks({st}, "ns");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->hashes, (std::vector<uint64_t>{5, 3, 9}));
  EXPECT_TRUE(b->Contains(9));
  EXPECT_FALSE(b->Contains(4));
  // Re-register without blocks keeps the table, and resets the prefill time.
  RegisterArgs a2{"ns", 64, Format::kFp16, nullptr, false, 0};
  ASSERT_TRUE(OpRegister({st, &lsn}, a2).ok());
  EXPECT_TRUE(OpBlocks({st}, "ns"));
  EXPECT_EQ(OpLookup({st}, "ns").prefill_us, 0u);
  // A table of zero hashes reads as no table.
  auto empty = std::make_shared<BlockTable>();
  empty->block_size = 16;
  RegisterArgs a3{"ns", 64, Format::kFp16, empty, false, 0};
  ASSERT_TRUE(OpRegister({st, &lsn}, a3).ok());
  EXPECT_FALSE(OpBlocks({st}, "ns"));
  EXPECT_FALSE(OpBlocks({st}, "nope"));
}

TEST(BlockTable, MembershipMatchesASet) {
  std::mt19937_64 rng(11);
  for (size_t n : {0u, 1u, 7u, 1562u, 100000u}) {
    BlockTable t;
    std::set<uint64_t> ref;
    for (size_t i = 0; i < n; ++i) {
      uint64_t h = i % 5 == 0 ? i : rng();  // structured and random values, and 0
      t.hashes.push_back(h);
      ref.insert(h);
    }
    if (n > 1) t.hashes.push_back(t.hashes[1]);  // a duplicate
    t.Finish();
    ASSERT_TRUE(t.finished());
    for (uint64_t h : ref) ASSERT_TRUE(t.Contains(h)) << n << " " << h;
    for (int i = 0; i < 20000; ++i) {
      uint64_t h = (i % 2) ? rng() : static_cast<uint64_t>(i) * 3 + 1;
      ASSERT_EQ(t.Contains(h), ref.count(h) == 1) << n << " " << h;
    }
    EXPECT_EQ(t.Contains(0), n > 0);
    // The batched probe answers as Contains does, for every count (full
    // groups of eight and a tail), hits, misses and 0 included.
    std::vector<uint64_t> probes;
    for (size_t i = 0; i < 1003; ++i) {
      if (i % 3 == 0 && n > 0) {
        probes.push_back(t.hashes[rng() % t.hashes.size()]);
      } else {
        probes.push_back(i % 7 == 0 ? 0 : rng());
      }
    }
    for (size_t m : {0u, 1u, 8u, 13u, 1003u}) {
      std::vector<uint8_t> bits((m + 7) / 8 + 1, 0);
      t.ContainsEach(reinterpret_cast<const uint8_t*>(probes.data()), m, bits.data());
      for (size_t i = 0; i < m; ++i)
        ASSERT_EQ((bits[i >> 3] >> (i & 7)) & 1, t.Contains(probes[i]) ? 1 : 0) << n << " " << i;
      if (m % 8 != 0) {
        ASSERT_EQ(bits[m / 8] >> (m % 8), 0) << "bits past the probes";
      }
      ASSERT_EQ(bits.back(), 0) << "no byte past the bitmap";
    }
  }
}

// Hash flooding: hashes are client input. These 65,536 values
// all land in slot 0 under the old public Fibonacci multiplier (k times its
// inverse mod 2^64, so h * M = k), which made Finish() cost 2^31 probes. With a
// per-process random seed they must spread like random keys: building does
// about one probe per hash and no run of occupied slots gets long.
TEST(BlockTable, CraftedCollisionsStaySmall) {
  constexpr uint64_t kM = 0x9E3779B97F4A7C15ull;
  uint64_t inv = kM;  // Newton's iteration for the inverse mod 2^64
  for (int i = 0; i < 6; ++i) inv *= 2 - kM * inv;
  ASSERT_EQ(kM * inv, 1u);
  constexpr uint64_t kN = 65536;
  BlockTable t;
  for (uint64_t k = 1; k <= kN; ++k) t.hashes.push_back(k * inv);
  t.Finish();
  // Random keys at load 0.5 average 1.5 probes per insert; the longest run is
  // O(log n) (about 30 here). The old multiplier gave kN^2/2 probes and a run of kN.
  EXPECT_LE(t.build_probes(), 4 * kN);
  EXPECT_LE(t.max_run(), 128u);
  for (uint64_t k = 1; k <= kN; ++k) ASSERT_TRUE(t.Contains(k * inv));
  EXPECT_FALSE(t.Contains((kN + 1) * inv));
}

TEST(Store, RowsRoundTripGapsOverwrite) {
  Store st({});
  const uint32_t dim = 64;
  ASSERT_TRUE(Reg(st, "ns", dim).ok());
  auto a = HalfRows(100, dim, 1);
  ASSERT_TRUE(Put(st, "ns_pk", 3, 10, a, dim).ok());
  auto plan = OpFetchRange({st}, "ns_pk", 3, 0, 120);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->rows, 120u);
  EXPECT_EQ(plan->stored_rows, 110u);
  auto bytes = Gather(*plan);
  ASSERT_EQ(bytes.size(), 120u * dim * 2);
  for (size_t i = 0; i < 10 * dim * 2; ++i) ASSERT_EQ(bytes[i], 0);
  EXPECT_EQ(0, std::memcmp(bytes.data() + 10 * dim * 2, a.data(), a.size() * 2));
  for (size_t i = 110 * dim * 2; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], 0);
  // Overwrite the middle and write far beyond (crossing chunk boundaries).
  auto b = HalfRows(5000, dim, 2);
  ASSERT_TRUE(Put(st, "ns_pk", 3, 50, b, dim).ok());
  auto plan2 = OpFetchRange({st}, "ns_pk", 3, 10, 5050);
  auto bytes2 = Gather(*plan2);
  EXPECT_EQ(0, std::memcmp(bytes2.data(), a.data(), 40 * dim * 2));
  EXPECT_EQ(0, std::memcmp(bytes2.data() + 40 * dim * 2, b.data(), b.size() * 2));
  // The earlier plan is pinned: its bytes did not change.
  EXPECT_EQ(Gather(*plan), bytes);
  auto info = OpSessionInfo({st}, "ns_pk");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_layers, 4u);
  EXPECT_EQ(info->layer_tokens[3], 5050u);
  EXPECT_EQ(info->layer_tokens[0], 0u);
  EXPECT_EQ(st.Stats().bytes, 5050u * dim * 2);
  // Nothing stored in another layer / side.
  auto empty = OpFetchRange({st}, "ns_pv", 3, 0, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->stored_rows, 0u);
  EXPECT_EQ(OpFetchRange({st}, "nope_pk", 0, 0, 1).status().code(), Code::kNotFound);
  EXPECT_EQ(OpFetchRange({st}, "ns", 0, 0, 1).status().code(), Code::kNotFound);
}

TEST(Store, IdsAndBatch) {
  Store st({});
  const uint32_t dim = 32;
  ASSERT_TRUE(Reg(st, "ns", dim).ok());
  auto a = HalfRows(8, dim, 3);
  ASSERT_TRUE(Put(st, "ns_pv", 0, 0, a, dim).ok());
  ASSERT_TRUE(Put(st, "ns_pv", 2, 0, a, dim).ok());
  uint64_t ids[] = {7, 0, 100};
  auto p = OpFetchIds({st}, "ns_pv", 0, ids);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stored_rows, 2u);
  auto bytes = Gather(*p);
  EXPECT_EQ(0, std::memcmp(bytes.data(), a.data() + 7 * dim, dim * 2));
  EXPECT_EQ(0, std::memcmp(bytes.data() + dim * 2, a.data(), dim * 2));
  auto batch = OpFetchBatch({st}, "ns_pv", 0, 8, 0);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 3u);
  EXPECT_EQ((*batch)[0].stored_rows, 8u);
  EXPECT_EQ((*batch)[1].stored_rows, 0u);
  EXPECT_EQ((*batch)[2].stored_rows, 8u);
  EXPECT_EQ(OpFetchBatch({st}, "ns_pk", 0, 8, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(OpFetchBatch({st}, "ns_pv", 0, 8, 5)->size(), 5u);
}

TEST(Store, LruEvictsWholeNamespacesInAccessOrder) {
  Store st({/*max_sessions=*/8, 0});
  for (const char* n : {"a", "b", "c", "d"}) ASSERT_TRUE(Reg(st, n).ok());
  auto rows = HalfRows(1, 64, 4);
  ASSERT_TRUE(Put(st, "a_pv", 0, 0, rows, 64).ok());      // touch a via a store
  ASSERT_TRUE(OpFetchRange({st}, "b_pk", 0, 0, 1).ok());  // touch b via a fetch
  ASSERT_TRUE(Reg(st, "e").ok());                         // evicts c
  EXPECT_FALSE(OpLookup({st}, "c").hit);
  EXPECT_TRUE(OpLookup({st}, "d").hit);  // now d is most recent
  ASSERT_TRUE(Reg(st, "f").ok());        // evicts a (a < b < e < d)
  EXPECT_FALSE(OpLookup({st}, "a").hit);
  EXPECT_TRUE(OpLookup({st}, "b").hit);
  EXPECT_EQ(st.Stats().evictions, 4u);
  EXPECT_EQ(st.Stats().sessions, 8u);
}

// Sampled LRU (eviction.cc): with more namespaces than maxmemory-samples the
// victims come from the least recently used ones (the pool keeps the oldest
// seen), not necessarily in exact order.
TEST(Store, SampledLruEvictsAmongTheOldest) {
  constexpr int kN = 200, kNew = 20;
  Store st({/*max_sessions=*/2 * kN, 0});
  auto name = [](int i) { return "n" + std::to_string(i); };
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(Reg(st, name(i)).ok());
  for (int i = kN / 2; i < kN; ++i) ASSERT_TRUE(OpLookup({st}, name(i)).hit);  // the recent half
  for (int i = 0; i < kNew; ++i) ASSERT_TRUE(Reg(st, "new" + std::to_string(i)).ok());
  int old_gone = 0, recent_gone = 0;
  for (int i = 0; i < kN; ++i)
    if (!OpLookup({st}, name(i)).hit) ++(i < kN / 2 ? old_gone : recent_gone);
  EXPECT_EQ(old_gone + recent_gone, kNew);
  EXPECT_GE(old_gone, kNew - 2) << "sampled LRU evicted " << recent_gone << " recent namespaces";
  EXPECT_EQ(st.Stats().sessions, 2u * kN);
}

// With maxmemory-samples at least the population, eviction is exact LRU.
TEST(Store, EnoughSamplesEvictInExactLruOrder) {
  constexpr int kN = 50;
  Store st({/*max_sessions=*/2 * kN, 0});
  st.SetEvictionSamples(64);
  auto name = [](int i) { return "s" + std::to_string(i); };
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(Reg(st, name(i)).ok());
  for (int i = kN - 1; i >= 0; --i) ASSERT_TRUE(OpLookup({st}, name(i)).hit);  // s49 oldest
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(Reg(st, "x" + std::to_string(k)).ok());
    // Exactly s49, s48, ... went, in that order.
    NamespaceInfo info;
    EXPECT_FALSE(OpDescribe({st}, name(kN - 1 - k), &info)) << k;
    EXPECT_TRUE(OpDescribe({st}, name(kN - 2 - k), &info)) << k;
  }
}

TEST(Store, ByteBudget) {
  const uint32_t dim = 64;  // 128 bytes per fp16 row
  Store st({256, 128 * 100});
  ASSERT_TRUE(Reg(st, "a", dim).ok());
  ASSERT_TRUE(Reg(st, "b", dim).ok());
  ASSERT_TRUE(Put(st, "a_pk", 0, 0, HalfRows(40, dim, 1), dim).ok());
  ASSERT_TRUE(Put(st, "b_pk", 0, 0, HalfRows(40, dim, 2), dim).ok());
  // b needs 40 more rows: a (least recent) is evicted.
  ASSERT_TRUE(Put(st, "b_pv", 0, 0, HalfRows(40, dim, 3), dim).ok());
  EXPECT_FALSE(OpLookup({st}, "a").hit);
  EXPECT_EQ(st.Stats().bytes, 80u * 128);
  // Larger than the whole budget: OOM, nothing changes.
  uint64_t lsn;
  auto big = HalfRows(30, dim, 4);
  Status s = OpStoreRows({st, &lsn}, "b_pv", 1, 0, 30, F16In(big));
  EXPECT_EQ(s.code(), Code::kOutOfBudget);
  EXPECT_EQ(st.Stats().bytes, 80u * 128);
  EXPECT_TRUE(OpLookup({st}, "b").hit);
  // Overwriting existing rows costs nothing.
  EXPECT_TRUE(Put(st, "b_pv", 0, 0, HalfRows(40, dim, 5), dim).ok());
  // Lowering the budget evicts.
  ASSERT_TRUE(Reg(st, "c", dim).ok());
  ASSERT_TRUE(st.SetMaxBytes(128 * 50, &lsn).ok());
  EXPECT_FALSE(OpLookup({st}, "b").hit);  // least recent, and over the new budget
  EXPECT_TRUE(OpLookup({st}, "c").hit);
  EXPECT_EQ(st.Stats().bytes, 0u);
}

std::shared_ptr<BlockTable> Table(uint64_t n, uint64_t seed) {
  auto t = std::make_shared<BlockTable>();
  t->block_size = 16;
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < n; ++i) t->hashes.push_back(rng());
  t->Finish();
  return t;
}

Status RegBlocks(Store& st, std::string_view ns, std::shared_ptr<const BlockTable> t) {
  RegisterArgs a;
  a.ns = ns;
  a.kv_dim = 64;
  a.blocks = std::move(t);
  uint64_t lsn;
  return OpRegister({st, &lsn}, a);
}

// Block tables (hashes + index) are memory the store holds;
// they count in vstore_bytes and against the byte budget like rows.
TEST(Store, BlockTablesCountInBytesAndBudget) {
  const uint64_t tb = Table(10000, 1)->MemoryBytes();  // 10000 hashes + 32768-slot index
  ASSERT_EQ(tb, (10000u + 32768u) * 8);
  Store st({256, 2 * tb + tb / 2});  // room for two tables
  ASSERT_TRUE(RegBlocks(st, "a", Table(10000, 1)).ok());
  EXPECT_EQ(st.Stats().bytes, tb);
  EXPECT_GE(st.Stats().allocated_bytes, st.Stats().bytes);
  ASSERT_TRUE(RegBlocks(st, "b", Table(10000, 2)).ok());
  EXPECT_EQ(st.Stats().bytes, 2 * tb);
  // A third table evicts the least recently used namespace.
  ASSERT_TRUE(RegBlocks(st, "c", Table(10000, 3)).ok());
  EXPECT_FALSE(OpLookup({st}, "a").hit);
  EXPECT_TRUE(OpLookup({st}, "b").hit);
  EXPECT_EQ(st.Stats().bytes, 2 * tb);
  // A table larger than the whole budget is refused and changes nothing.
  Status s = RegBlocks(st, "d", Table(60000, 4));
  EXPECT_EQ(s.code(), Code::kOutOfBudget);
  EXPECT_FALSE(OpLookup({st}, "d").hit);
  EXPECT_EQ(st.NamespaceCount(), 2u);
  EXPECT_EQ(st.Stats().bytes, 2 * tb);
  // Re-registering replaces the table and its bytes; without BLOCKS keeps it.
  const uint64_t small = Table(100, 5)->MemoryBytes();
  ASSERT_TRUE(RegBlocks(st, "b", Table(100, 5)).ok());
  EXPECT_EQ(st.Stats().bytes, tb + small);
  ASSERT_TRUE(RegBlocks(st, "b", nullptr).ok());
  EXPECT_EQ(st.Stats().bytes, tb + small);
  // Rows and the table share the namespace's budget.
  const uint32_t dim = 64;                                               // 128 bytes per row
  const uint64_t rows = (2 * tb + tb / 2 - small) / 128 - 10;            // b fits alone, not with c
  ASSERT_TRUE(Put(st, "b_pk", 0, 0, HalfRows(rows, dim, 6), dim).ok());  // evicts c
  EXPECT_FALSE(OpLookup({st}, "c").hit);
  EXPECT_EQ(st.Stats().bytes, small + rows * 128);
  // More rows than the budget leaves beside b's own table: refused.
  uint64_t lsn;
  EXPECT_EQ(Put(st, "b_pk", 0, rows, HalfRows(20, dim, 7), dim).code(), Code::kOutOfBudget);
  std::string_view names[] = {"b"};
  ASSERT_TRUE(OpDrop({st, &lsn}, names).ok());
  EXPECT_EQ(st.Stats().bytes, 0u);
}

// A store's WAL write (checksum + pwrite of the whole
// payload) and a register's (up to 8 MiB of hashes) run with no store lock
// held. The sink below parks the write of the first big record; meanwhile
// another thread must be able to fetch from the same side, register, drop and
// read stats. With the locks held across the write it would block until the
// write is released; the bound only stops a failing run from hanging.
class ParkingSink : public MutationSink {
 public:
  ~ParkingSink() override = default;
  // A reserved store of 1000 rows or more, or a register of 1000 hashes or
  // more, parks its write.
  Result<uint64_t> Reserve(const persist::Record& r, PendingRecord* out) override {
    uint64_t l = ++lsn;
    if (out == nullptr) return l;
    bool park = std::visit(
        persist::Overloaded{[](const persist::StoreRec& x) { return x.count >= 1000; },
                            [](const persist::RegisterRec& x) { return x.hash_count >= 1000; },
                            [](const auto&) { return false; }},
        r);
    out->lsn = l;
    out->write = [this, l, park](std::span<const uint8_t>) -> Result<uint64_t> {
      if (park) Park();
      return l;
    };
    return l;
  }
  // Runs `f` on another thread while a parked write waits; true if it finished.
  std::function<bool()> while_parked;
  bool other_finished = false;

 private:
  void Park() {
    if (while_parked) other_finished = while_parked();
  }
  std::atomic<uint64_t> lsn{0};
};

// Starts `f` on another thread and waits (bounded) for it; the thread is
// joined later (`*joined`), after the parked write was released, so that a
// failing run fails instead of deadlocking.
bool FinishesWhileParked(const std::function<void()>& f, std::future<void>* joined) {
  *joined = std::async(std::launch::async, f);
  return joined->wait_for(std::chrono::seconds(30)) == std::future_status::ready;
}

TEST(Store, LogWritesRunWithoutStoreLocks) {
  ParkingSink sink;
  Store st({});
  st.SetSink(&sink);
  const uint32_t dim = 64;
  ASSERT_TRUE(Reg(st, "a", dim).ok());
  ASSERT_TRUE(Put(st, "a_pk", 0, 0, HalfRows(10, dim, 1), dim).ok());
  // A big store to a_pk is being written: the same side serves fetches, the
  // registry serves registers and drops.
  std::future<void> other;
  sink.while_parked = [&] {
    return FinishesWhileParked(
        [&] {
          auto p = OpFetchRange({st}, "a_pk", 0, 0, 10);
          EXPECT_TRUE(p.ok());
          EXPECT_EQ(p->stored_rows, 10u);  // the parked store is not visible yet
          EXPECT_TRUE(Reg(st, "b", dim).ok());
          std::string_view names[] = {"b"};
          uint64_t lsn;
          EXPECT_TRUE(OpDrop({st, &lsn}, names).ok());
          (void)st.Stats();
        },
        &other);
  };
  ASSERT_TRUE(Put(st, "a_pk", 0, 0, HalfRows(2000, dim, 2), dim).ok());
  other.wait();
  EXPECT_TRUE(sink.other_finished);
  EXPECT_EQ(OpFetchRange({st}, "a_pk", 0, 0, 2000)->stored_rows, 2000u);
  // A register with a big table is being written: other namespaces are served.
  sink.other_finished = false;
  sink.while_parked = [&] {
    return FinishesWhileParked(
        [&] {
          EXPECT_TRUE(OpLookup({st}, "a").hit);
          EXPECT_FALSE(OpLookup({st}, "c").hit);  // applied only once its record is written
          EXPECT_TRUE(Put(st, "a_pv", 0, 0, HalfRows(10, dim, 3), dim).ok());
          (void)st.Stats();
        },
        &other);
  };
  ASSERT_TRUE(RegBlocks(st, "c", Table(5000, 7)).ok());
  other.wait();
  EXPECT_TRUE(sink.other_finished);
  EXPECT_TRUE(OpBlocks({st}, "c"));
}

// Stores to one side apply in LSN order even when their writes finish in the
// other order: the first record's write is held until the second's is done;
// the second must still apply after the first (replay applies by LSN).
class ReorderingSink : public ParkingSink {
 public:
  Result<uint64_t> Reserve(const persist::Record& r, PendingRecord* out) override {
    if (out == nullptr || !std::holds_alternative<persist::StoreRec>(r))
      return ParkingSink::Reserve(r, out);
    uint64_t l = ++lsn_;
    out->lsn = l;
    {
      std::lock_guard<std::mutex> g(mu_);
      reserved_ = l;
    }
    cv_.notify_all();
    out->write = [this, l](std::span<const uint8_t>) -> Result<uint64_t> {
      std::unique_lock<std::mutex> g(mu_);
      if (l == 1) {
        // Bounded only so that a broken store fails instead of hanging.
        held_ok = cv_.wait_for(g, std::chrono::seconds(30), [&] { return second_written_; });
        // Give the second store the chance to finish first, as it would if the
        // store applied in write order. It cannot when the store keeps LSN
        // order, so this wait then runs out (it asserts nothing).
        (void)cv_.wait_for(g, std::chrono::milliseconds(200), [&] { return second_done_; });
      } else {
        second_written_ = true;
        cv_.notify_all();
      }
      return l;
    };
    return l;
  }
  void SecondDone() {
    {
      std::lock_guard<std::mutex> g(mu_);
      second_done_ = true;
    }
    cv_.notify_all();
  }
  void WaitReserved(uint64_t l) {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return reserved_ >= l; });
  }
  bool held_ok = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t reserved_ = 0;
  bool second_written_ = false;
  bool second_done_ = false;
  std::atomic<uint64_t> lsn_{0};
};

TEST(Store, StoresToOneSideApplyInLsnOrder) {
  ReorderingSink sink;
  Store st({});
  const uint32_t dim = 64;
  ASSERT_TRUE(Reg(st, "a", dim).ok());
  st.SetSink(&sink);
  auto first = HalfRows(10, dim, 1), second = HalfRows(10, dim, 2);
  std::thread ta([&] { EXPECT_TRUE(Put(st, "a_pk", 0, 0, first, dim).ok()); });
  sink.WaitReserved(1);
  std::thread tb([&] {
    EXPECT_TRUE(Put(st, "a_pk", 0, 0, second, dim).ok());
    sink.SecondDone();
  });
  ta.join();
  tb.join();
  EXPECT_TRUE(sink.held_ok);
  auto p = OpFetchRange({st}, "a_pk", 0, 0, 10);
  ASSERT_TRUE(p.ok());
  const uint8_t* b = reinterpret_cast<const uint8_t*>(second.data());
  EXPECT_EQ(Gather(*p), std::vector<uint8_t>(b, b + second.size() * 2));  // LSN 2 last
}

TEST(Store, MemoryStaysNearStoredBytes) {
  Store st({});
  const uint32_t dim = 128;
  ASSERT_TRUE(Reg(st, "ns", dim).ok());
  // Token-by-token appends, the worst case for growth.
  auto row = HalfRows(1, dim, 9);
  for (uint64_t t = 0; t < 3000; ++t) ASSERT_TRUE(Put(st, "ns_pk", 0, t, row, dim).ok());
  auto s = st.Stats();
  EXPECT_EQ(s.bytes, 3000u * dim * 2);
  EXPECT_LE(s.allocated_bytes, s.bytes * 5 / 4 + 16 * dim * 2);
}

TEST(Store, NonFiniteRefusedForQuantized) {
  Store st({});
  ASSERT_TRUE(Reg(st, "q", 32, Format::kInt8).ok());
  std::vector<float> rows(64, 1.0f);
  rows[40] = std::numeric_limits<float>::infinity();
  uint64_t lsn;
  Status s = OpStoreRows({st, &lsn}, "q_pk", 0, 0, 2,
                         {RowInput::Type::kF32, rows.data(), rows.size() * 4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "non-finite value in row 1");
  EXPECT_EQ(st.Stats().bytes, 0u);
  // Wrong blob size.
  s = OpStoreRows({st, &lsn}, "q_pk", 0, 0, 3,
                  {RowInput::Type::kF32, rows.data(), rows.size() * 4});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

// Records every mutation; can be told to fail.
class RecordingSink : public MutationSink {
 public:
  struct Rec {
    char op;
    std::string ns;
    uint64_t inc;
    uint32_t dim;
    Format fmt;
    int side;
    uint32_t layer;
    uint64_t start, count;
    std::vector<uint8_t> bytes;
    std::vector<uint64_t> hashes;
    std::string parent;  // a child registration
    uint64_t parent_inc = 0;
  };
  // Namespace records are recorded when written (a reserved one with its
  // body); string records are not logged.
  Result<uint64_t> Reserve(const persist::Record& rec, PendingRecord* out) override {
    std::optional<Rec> r =
        std::visit(persist::Overloaded{
                       [](const persist::RegisterRec& x) -> std::optional<Rec> {
                         Rec e{'R', std::string(x.ns), x.incarnation, x.kv_dim, x.fmt};
                         if (x.has_blocks) e.hashes = persist::BlockRecordOf(x).hashes;
                         e.parent = x.parent;
                         e.parent_inc = x.parent_incarnation;
                         return e;
                       },
                       [](const persist::StoreRec& x) -> std::optional<Rec> {
                         Rec e{'S',     std::string(x.ns), x.incarnation,
                               0,       Format::kFp16,     static_cast<int>(x.side),
                               x.layer, x.start,           x.count};
                         e.bytes.assign(x.rows.begin(), x.rows.end());
                         return e;
                       },
                       [](const persist::DropRec& x) -> std::optional<Rec> {
                         return Rec{'D', std::string(x.ns), x.incarnation};
                       },
                       [](const persist::FlushAllRec&) -> std::optional<Rec> { return Rec{'F'}; },
                       [](const auto&) -> std::optional<Rec> { return std::nullopt; }},
                   rec);
    if (!r) {
      if (out != nullptr) out->Unlogged();
      return uint64_t{0};
    }
    if (out == nullptr) return Add(std::move(*r));
    out->lsn = 0;
    out->write = [this, r = std::move(*r)](std::span<const uint8_t> body) mutable {
      if (r.op == 'S') r.bytes.assign(body.begin(), body.end());
      return Add(std::move(r));
    };
    return uint64_t{0};
  }
  Result<uint64_t> Add(Rec r) {
    if (fail) return Status::IOError("disk full");
    recs.push_back(std::move(r));
    return ++lsn;
  }
  std::vector<Rec> recs;
  bool fail = false;
  uint64_t lsn = 0;
};

void Replay(const std::vector<RecordingSink::Rec>& recs, Store* st) {
  for (const auto& r : recs) {
    switch (r.op) {
      case 'R': {
        BlockTable t;
        t.hashes = r.hashes;
        t.block_size = 16;
        ASSERT_TRUE(st->ApplyRegister(r.ns, r.inc, r.dim, r.fmt, r.hashes.empty() ? nullptr : &t,
                                      r.parent, r.parent_inc)
                        .ok());
        break;
      }
      case 'S':
        (void)st->ApplyStored(r.ns, r.inc, static_cast<Side>(r.side), r.layer, r.start, r.count,
                              r.bytes);
        break;
      case 'D':
        st->ApplyDrop(r.ns, r.inc);
        break;
      case 'F':
        st->ApplyFlushAll();
        break;
    }
  }
}

TEST(Store, SinkSeesEveryMutationAndReplayReproducesState) {
  RecordingSink sink;
  Store st({6, 0});
  st.SetSink(&sink);
  const uint32_t dim = 32;
  ASSERT_TRUE(Reg(st, "a", dim, Format::kInt8).ok());
  ASSERT_TRUE(Reg(st, "b", dim, Format::kTurbo4).ok());
  ASSERT_TRUE(Reg(st, "c", dim, Format::kFp16).ok());
  std::vector<float> rows(10 * dim);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (auto& x : rows) x = nd(rng);
  uint64_t lsn = 0;
  for (const char* sid : {"a_pk", "b_pv", "c_pk"})
    ASSERT_TRUE(
        OpStoreRows({st, &lsn}, sid, 1, 2, 10, {RowInput::Type::kF32, rows.data(), rows.size() * 4})
            .ok());
  EXPECT_GT(lsn, 0u);
  ASSERT_TRUE(Reg(st, "d", dim).ok());  // evicts a
  std::string_view drop[] = {"b"};
  ASSERT_TRUE(OpDrop({st, &lsn}, drop).ok());
  ASSERT_TRUE(Reg(st, "b", dim, Format::kMlx4g32).ok());  // new incarnation
  // A failing sink: nothing changes.
  sink.fail = true;
  EXPECT_FALSE(OpStoreRows({st, &lsn}, "c_pk", 1, 20, 10,
                           {RowInput::Type::kF32, rows.data(), rows.size() * 4})
                   .ok());
  EXPECT_FALSE(Reg(st, "zz", dim).ok());
  EXPECT_EQ(OpSessionInfo({st}, "c_pk")->layer_tokens[1], 12u);
  sink.fail = false;

  Store replayed({6, 0});
  Replay(sink.recs, &replayed);
  EXPECT_EQ(replayed.NamespaceCount(), st.NamespaceCount());
  EXPECT_FALSE(OpLookup({replayed}, "a").hit);
  for (const char* sid : {"c_pk", "b_pv", "d_pk"}) {
    auto p1 = OpFetchRange({st}, sid, 1, 0, 12);
    auto p2 = OpFetchRange({replayed}, sid, 1, 0, 12);
    ASSERT_TRUE(p1.ok() && p2.ok());
    EXPECT_EQ(Gather(*p1), Gather(*p2)) << sid;
  }
  EXPECT_EQ(replayed.Stats().bytes, st.Stats().bytes);
  // A stale store record for the old incarnation of b is skipped.
  EXPECT_EQ(OpFetchRange({replayed}, "b_pv", 1, 0, 12)->stored_rows, 0u);
}

// A registration whose log write fails changes nothing, bytes included.
TEST(Store, FailedRegisterWriteKeepsTableAndBytes) {
  RecordingSink sink;
  Store st({256, 0});
  st.SetSink(&sink);
  auto t1 = Table(1000, 1);
  ASSERT_TRUE(RegBlocks(st, "a", t1).ok());
  const uint64_t bytes = st.Stats().bytes;
  ASSERT_EQ(bytes, t1->MemoryBytes());
  sink.fail = true;
  EXPECT_EQ(RegBlocks(st, "a", Table(5000, 2)).code(), Code::kIOError);
  EXPECT_EQ(RegBlocks(st, "b", Table(5000, 3)).code(), Code::kIOError);
  sink.fail = false;
  EXPECT_EQ(st.Stats().bytes, bytes);
  EXPECT_FALSE(OpLookup({st}, "b").hit);
  EXPECT_EQ(OpBlocks({st}, "a")->hashes, t1->hashes);
  Store replayed({256, 0});
  Replay(sink.recs, &replayed);
  EXPECT_EQ(replayed.Stats().bytes, bytes);
}

TEST(Store, SnapshotCaptureIsConsistentAndPinned) {
  Store st({});
  const uint32_t dim = 64;
  ASSERT_TRUE(Reg(st, "x", dim).ok());
  auto a = HalfRows(300, dim, 6);
  ASSERT_TRUE(Put(st, "x_pk", 0, 0, a, dim).ok());
  int barrier_calls = 0;
  Status bs;
  auto views = st.CaptureSnapshot(
      [&] {
        ++barrier_calls;
        return Status::OK();
      },
      &bs);
  ASSERT_TRUE(bs.ok());
  EXPECT_EQ(barrier_calls, 1);
  ASSERT_EQ(views.size(), 1u);
  ASSERT_EQ(views[0].layers[0].size(), 1u);
  // Writes after the capture do not change the captured bytes.
  ASSERT_TRUE(Put(st, "x_pk", 0, 0, HalfRows(300, dim, 7), dim).ok());
  std::string_view names[] = {"x"};
  uint64_t lsn;
  ASSERT_TRUE(OpDrop({st, &lsn}, names).ok());
  auto bytes = Gather(PlanOf(views[0].layers[0][0], dim * 2));
  ASSERT_EQ(bytes.size(), a.size() * 2);
  EXPECT_EQ(0, std::memcmp(bytes.data(), a.data(), bytes.size()));
}

// A snapshot thread reads its captured chunks, drops its views and signals
// with a relaxed flag (no happens-before); a writer then stores into the same
// rows. Written in place (use count back to 1), that write races with the
// snapshot's reads (ThreadSanitizer, make test-tsan); a captured chunk is
// copied instead, and the captured bytes stay as they were.
TEST(Store, WriteAfterASnapshotNeverTouchesItsChunks) {
  Store st({});
  const uint32_t dim = 64;
  ASSERT_TRUE(Reg(st, "s", dim).ok());
  auto a = HalfRows(64, dim, 11);
  ASSERT_TRUE(Put(st, "s_pk", 0, 0, a, dim).ok());
  Status bs;
  auto views = st.CaptureSnapshot(nullptr, &bs);
  ASSERT_TRUE(bs.ok());
  ASSERT_EQ(views.size(), 1u);
  const uint8_t* captured = views[0].layers[0][0].segments[0].data;
  std::atomic<bool> done{false};
  uint64_t sum = 0;
  std::thread reader([&] {
    for (uint8_t b : Gather(PlanOf(views[0].layers[0][0], dim * 2))) sum += b;
    views.clear();
    done.store(true, std::memory_order_relaxed);
  });
  while (!done.load(std::memory_order_relaxed)) std::this_thread::yield();
  ASSERT_TRUE(Put(st, "s_pk", 0, 0, HalfRows(64, dim, 12), dim).ok());
  reader.join();
  EXPECT_GT(sum, 0u);
  auto plan = OpFetchRange({st}, "s_pk", 0, 0, 64);
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->segments[0].data, captured);  // written to a copy
}

TEST(Store, ConcurrentStoreFetchDropIsSafe) {
  Store st({64, 0});
  const uint32_t dim = 64;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Reg(st, "stable" + std::to_string(i), dim).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::string sid = "stable" + std::to_string(t) + "_pk";
      for (int it = 0; it < 200; ++it) {
        auto rows = HalfRows(64, dim, t * 1000 + it);
        if (!Put(st, sid, it % 4, 0, rows, dim).ok()) ++errors;
        auto p = OpFetchRange({st}, sid, it % 4, 0, 64);
        if (!p.ok() || Gather(*p) != std::vector<uint8_t>(
                                         reinterpret_cast<uint8_t*>(rows.data()),
                                         reinterpret_cast<uint8_t*>(rows.data()) + rows.size() * 2))
          ++errors;
      }
    });
  }
  // A churner registers, fills, fetches and drops a volatile namespace.
  ts.emplace_back([&] {
    for (int it = 0; it < 300 && !stop; ++it) {
      (void)Reg(st, "vol", dim);
      (void)Put(st, "vol_pv", 0, 0, HalfRows(100, dim, it), dim);
      std::string_view names[] = {"vol"};
      uint64_t lsn;
      (void)OpDrop({st, &lsn}, names);
    }
  });
  ts.emplace_back([&] {
    for (int it = 0; it < 600; ++it) {
      auto p = OpFetchRange({st}, "vol_pv", 0, 0, 100);
      if (p.ok()) {
        volatile uint8_t sink = 0;
        for (const auto& s : p->segments)
          if (s.data) sink = static_cast<uint8_t>(sink ^ s.data[s.rows * p->row_bytes - 1]);
        (void)sink;
      }
    }
  });
  for (auto& th : ts) th.join();
  EXPECT_EQ(errors.load(), 0);
}

// ---- string keys ----

Status SetStr(Store& st, std::string_view k, std::string_view v, int64_t exp = 0) {
  SetOptions o;
  o.expire_at_ms = exp;
  uint64_t lsn;
  return store::OpSet({st, &lsn}, k, StrValue::Copy(v), o).status();
}

std::string GetStr(Store& st, std::string_view k) {
  auto r = store::OpGet({st}, k);
  if (!r.ok()) return "<" + r.status().ToString() + ">";
  return *r ? std::string((*r)->view()) : "<nil>";
}

TEST(Strings, SetGetNxXxAndOneKeySpace) {
  Store st({256, 0});
  ASSERT_TRUE(SetStr(st, "a", "1").ok());
  EXPECT_EQ(GetStr(st, "a"), "1");
  SetOptions nx;
  nx.cond = SetOptions::Cond::kNx;
  nx.want_old = true;
  uint64_t lsn;
  auto r = store::OpSet({st, &lsn}, "a", StrValue::Copy("2"), nx);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->done);
  EXPECT_EQ(std::string(r->old->view()), "1");
  ASSERT_TRUE(Reg(st, "ns").ok());
  EXPECT_EQ(SetStr(st, "ns", "x").code(), Code::kWrongType);
  EXPECT_EQ(SetStr(st, "ns_pv", "x").code(), Code::kWrongType);
  EXPECT_EQ(store::OpGet({st}, "ns_pk").status().code(), Code::kWrongType);
  EXPECT_EQ(Reg(st, "a").code(), Code::kWrongType);
  EXPECT_EQ(store::OpType({st}, "ns"), KeyType::kKvPrefix);
  EXPECT_EQ(store::OpType({st}, "a"), KeyType::kString);
  EXPECT_EQ(st.DbSize(), 2u);
  std::string_view del[] = {"ns_pk", "a", "zz"};
  EXPECT_EQ(*store::OpDelete({st, &lsn}, del), 2u);
  EXPECT_FALSE(OpLookup({st}, "ns").hit);
  EXPECT_EQ(st.DbSize(), 0u);
}

TEST(Strings, ExpiryLazyAndActive) {
  Store st({256, 0});
  int64_t past = UnixMillis() - 1;
  int64_t future = past + 1000000;
  ASSERT_TRUE(SetStr(st, "live", "v", future).ok());
  ASSERT_TRUE(SetStr(st, "dead1", "v", past + 2).ok());  // due within ~1 ms
  ASSERT_TRUE(SetStr(st, "dead2", "v", past + 2).ok());
  while (UnixMillis() <= past + 2) std::this_thread::yield();
  EXPECT_EQ(GetStr(st, "dead1"), "<nil>");  // lazy
  EXPECT_EQ(st.DbSize(), 2u);               // dead2 not yet removed
  EXPECT_EQ(st.ExpireActive(100), 1u);      // active
  EXPECT_EQ(st.DbSize(), 1u);
  EXPECT_EQ(store::OpExpireTimeMs({st}, "live"), future);
  EXPECT_EQ(st.KeyStats().expired, 2u);
  EXPECT_EQ(st.KeyStats().expires, 1u);
}

TEST(Strings, OneLruWithNamespacesAndBudget) {
  // Budget for about three 1000-byte values; the oldest key or namespace goes first.
  const uint64_t charge = 1000 + 1 + kStrEntryOverhead + 24;  // value rounded to 64 + key
  Store st({256, 3 * charge + 100});
  ASSERT_TRUE(SetStr(st, "a", std::string(1000, 'a')).ok());
  ASSERT_TRUE(Reg(st, "ns").ok());  // a namespace with no rows costs nothing, but has a stamp
  ASSERT_TRUE(SetStr(st, "b", std::string(1000, 'b')).ok());
  ASSERT_TRUE(SetStr(st, "c", std::string(1000, 'c')).ok());
  EXPECT_EQ(GetStr(st, "a"), std::string(1000, 'a'));  // a is now the most recent
  ASSERT_TRUE(SetStr(st, "d", std::string(1000, 'd')).ok());
  // Oldest first: the namespace (stamp after a's SET, before b), then b.
  EXPECT_FALSE(OpLookup({st}, "ns").hit);
  EXPECT_EQ(GetStr(st, "b"), "<nil>");
  EXPECT_EQ(GetStr(st, "a"), std::string(1000, 'a'));
  EXPECT_GE(st.KeyStats().evicted_keys, 2u);
  EXPECT_LE(st.Stats().bytes, 3 * charge + 100);
  // A value larger than the whole budget is refused and changes nothing.
  EXPECT_EQ(SetStr(st, "huge", std::string(10000, 'h')).code(), Code::kOutOfBudget);
  EXPECT_EQ(GetStr(st, "a"), std::string(1000, 'a'));
  // noeviction: a write that needs room fails instead.
  st.SetEvictPolicy(EvictPolicy::kNoEviction);
  EXPECT_EQ(SetStr(st, "e", std::string(1000, 'e')).code(), Code::kOutOfBudget);
  EXPECT_EQ(GetStr(st, "d"), std::string(1000, 'd'));
}

TEST(Strings, ScanVisitsEveryKeyPresentThroughout) {
  Store st({256, 0});
  std::set<std::string> base;
  for (int i = 0; i < 2000; ++i) {
    std::string k = "base" + std::to_string(i);
    ASSERT_TRUE(SetStr(st, k, "v").ok());
    base.insert(k);
  }
  std::set<std::string> seen;
  uint64_t cursor = 0;
  int calls = 0, added = 0;
  do {
    ScanResult r = store::OpScan({st}, cursor, 7, std::nullopt, KeyType::kNone);
    seen.insert(r.keys.begin(), r.keys.end());
    cursor = r.cursor;
    // Inserts (rehashing the map) and deletes of other keys between calls.
    for (int j = 0; j < 20; ++j) ASSERT_TRUE(SetStr(st, "new" + std::to_string(added++), "v").ok());
    std::string victim = "new" + std::to_string(added / 2);
    std::string_view del[] = {victim};
    uint64_t lsn;
    ASSERT_TRUE(store::OpDelete({st, &lsn}, del).ok());
    ASSERT_LT(++calls, 100000);
  } while (cursor != 0);
  for (const auto& k : base) EXPECT_TRUE(seen.count(k)) << k;
}

TEST(Strings, RenameAppendMsetnx) {
  Store st({256, 0});
  uint64_t lsn;
  ASSERT_TRUE(SetStr(st, "a", "x", UnixMillis() + 100000).ok());
  EXPECT_EQ(*store::OpAppend({st, &lsn}, "a", "yz"), 3u);
  bool done = false;
  ASSERT_TRUE(store::OpRename({st, &lsn}, "a", "b", false, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(GetStr(st, "b"), "xyz");
  EXPECT_GT(store::OpExpireTimeMs({st}, "b"), 0);  // the TTL moves with the value
  EXPECT_EQ(store::OpRename({st, &lsn}, "a", "c", false, &done).code(), Code::kNotFound);
  std::string_view kv[] = {"b", "1", "n", "2"};
  EXPECT_FALSE(*store::OpMSet({st, &lsn}, kv, true));
  EXPECT_EQ(GetStr(st, "n"), "<nil>");
  EXPECT_TRUE(*store::OpMSet({st, &lsn}, kv, false));
  EXPECT_EQ(GetStr(st, "b"), "1");
  EXPECT_EQ(store::OpExpireTimeMs({st}, "b"), -1);  // MSET clears the TTL
}

}  // namespace
}  // namespace pion::store

namespace pion::store {
namespace {

// ---- shards ----

TEST(Shards, FollowTheKeyHashAndHashTags) {
  std::set<size_t> seen;
  for (int i = 0; i < 64; ++i) {
    std::string k = "key" + std::to_string(i);
    // A key without a tag: the top bits of its lookup hash (KV.BLOCK.MATCH
    // takes the shard from the hash it looks the key up with).
    EXPECT_EQ(Keyspace::ShardIndex(k), Keyspace::ShardOfHash(Keyspace::LookupHash(k))) << k;
    EXPECT_LT(Keyspace::ShardIndex(k), kShards);
    seen.insert(Keyspace::ShardIndex(k));
    // A hash tag keeps a namespace and its session ids in one shard: the tag's.
    std::string tagged = "{t" + std::to_string(i) + "}ns";
    EXPECT_EQ(Keyspace::ShardIndex(tagged), Keyspace::ShardIndex(tagged + "_pk"));
    EXPECT_EQ(Keyspace::ShardIndex(tagged),
              Keyspace::ShardIndex("{t" + std::to_string(i) + "}other"));
    EXPECT_EQ(Keyspace::ShardIndex(tagged), Keyspace::ShardIndex("t" + std::to_string(i)));
    // Not a tag (Redis's rule: "{}" and an unclosed '{'): the whole key.
    EXPECT_EQ(Keyspace::ShardIndex("{}" + k),
              Keyspace::ShardOfHash(Keyspace::LookupHash("{}" + k)));
    EXPECT_EQ(Keyspace::ShardIndex(k + "{"), Keyspace::ShardOfHash(Keyspace::LookupHash(k + "{")));
  }
  EXPECT_GT(seen.size(), kShards / 2);  // 64 keys spread over the shards
}

// String keys in many shards still evict in exact LRU order (the oldest of
// the shards' list heads), interleaved with namespaces by stamp.
TEST(Shards, ExactLruOrderAcrossShards) {
  Store st({256, 0});
  const int kKeys = 24;
  std::set<size_t> shards;
  for (int i = 0; i < kKeys; ++i) {
    std::string k = "k" + std::to_string(i);
    shards.insert(Keyspace::ShardIndex(k));
    ASSERT_TRUE(SetStr(st, k, std::string(100, 'v')).ok());
  }
  ASSERT_GT(shards.size(), 4u);
  // Touch in a scrambled order; that is the eviction order.
  std::vector<std::string> order;
  for (int i = 0; i < kKeys; ++i) order.push_back("k" + std::to_string((i * 7) % kKeys));
  for (const std::string& k : order) ASSERT_EQ(GetStr(st, k), std::string(100, 'v'));
  std::vector<std::string_view> keys(order.begin(), order.end());
  ASSERT_EQ(store::OpExists({st}, keys), static_cast<uint64_t>(kKeys));  // EXISTS does not touch
  uint64_t lsn = 0;
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t bytes = st.Stats().bytes;
    ASSERT_TRUE(st.SetMaxBytes(bytes - 1, &lsn).ok());
    EXPECT_EQ(GetStr(st, order[i]), "<nil>") << i;
    if (i + 1 < kKeys) {
      EXPECT_EQ(store::OpType({st}, order[i + 1]), KeyType::kString) << i;
    }
  }
  EXPECT_EQ(st.DbSize(), 0u);
}

// Readers (GET, MGET, EXISTS, LOOKUP, BLOCKS, FETCH) take only their shard's
// lock while writers register, store, set, delete and evict across shards:
// no lost key, the byte accounting ends exact (TSan runs this too).
TEST(Shards, ConcurrentReadersAndWritersKeepTheAccounting) {
  Store st({1024, 64 * 1024});
  const int kThreads = 4, kRounds = 4000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&st, t] {
      std::mt19937 rng(t);
      auto h = HalfRows(2, 64, t);
      for (int r = 0; r < kRounds; ++r) {
        std::string k = "s" + std::to_string(rng() % 64);
        std::string ns = "n" + std::to_string(rng() % 32);
        uint64_t lsn = 0;
        switch (rng() % 9) {
          case 0:
            (void)SetStr(st, k, std::string(200 + rng() % 800, 'x'));
            break;
          case 1: {
            std::string_view del[] = {k, ns};
            (void)store::OpDelete({st, &lsn}, del);
            break;
          }
          case 2:
            (void)Reg(st, ns);
            break;
          case 3:
            (void)OpStoreRows({st, &lsn}, ns + "_pk", 0, rng() % 8, 2, F16In(h));
            break;
          case 4: {
            std::string_view keys[] = {k, ns, "s1", "n1_pv"};
            (void)store::OpMGet({st}, keys);
            (void)store::OpExists({st}, keys);
            break;
          }
          case 5:
            (void)OpLookup({st}, ns);
            (void)OpBlocks({st}, ns);
            break;
          case 6:
            (void)OpFetchRange({st}, ns + "_pk", 0, 0, 4);
            break;
          case 7: {
            // KV.BLOCK.MATCH over every string key (more than a chunk: the chunk's
            // shards are locked together) while the others write them.
            std::vector<std::string> names;
            for (int i = 0; i < 200; ++i) names.push_back("s" + std::to_string((r + i) % 64));
            std::vector<std::string_view> keys(names.begin(), names.end());
            uint8_t bits[25] = {};
            (void)OpBlockMatch({st}, keys, (r & 1) ? bits : nullptr, 0, "");
            break;
          }
          default:
            (void)GetStr(st, k);
            break;
        }
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_LE(st.Stats().bytes, 64u * 1024);
  auto all = store::OpKeys({st}, "*");
  EXPECT_EQ(all.size(), st.DbSize());
  std::vector<std::string_view> views(all.begin(), all.end());
  uint64_t lsn = 0;
  ASSERT_TRUE(store::OpDelete({st, &lsn}, views).ok());
  EXPECT_EQ(st.DbSize(), 0u);
  EXPECT_EQ(st.Stats().bytes, 0u);  // every charge given back
}

// The write path: whole chunks encoded in place, partial ones at either
// end through scratch; the stored bytes equal one EncodeRows of the input, for
// every format, and a fetch pinned before a whole-chunk overwrite keeps its bytes.
TEST(StoreWritePath, WholeAndPartialChunksExactBytesEveryFormat) {
  const uint32_t dim = 64;
  const Format fmts[] = {Format::kInt8, Format::kTurbo4, Format::kTurbo3, Format::kTurbo2,
                         Format::kFp16, Format::kFp8,    Format::kMlx4g32};
  for (Format f : fmts) {
    Store st({});
    ASSERT_TRUE(Reg(st, "w", dim, f).ok());
    auto info = OpSessionInfo({st}, "w_pk");
    ASSERT_TRUE(info.ok());
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    const uint64_t start = 5, count = 3000;  // partial head, whole chunks, partial tail
    std::vector<float> in(count * dim);
    for (float& x : in) x = nd(rng);
    uint64_t lsn = 0;
    ASSERT_TRUE(OpStoreRows({st, &lsn}, "w_pk", 0, start, count,
                            RowInput{RowInput::Type::kF32, in.data(), in.size() * 4})
                    .ok());
    auto plan = OpFetchRange({st}, "w_pk", 0, start, start + count);
    ASSERT_TRUE(plan.ok());
    std::vector<uint8_t> want(count * plan->row_bytes);
    ASSERT_TRUE(quant::EncodeRows(f, in.data(), count, dim, want.data()).ok());
    EXPECT_EQ(Gather(*plan), want) << quant::FormatName(f);
    // Overwrite everything while `plan` pins the old chunks: the plan's bytes stay.
    std::vector<float> in2(count * dim);
    for (float& x : in2) x = nd(rng);
    ASSERT_TRUE(OpStoreRows({st, &lsn}, "w_pk", 0, start, count,
                            RowInput{RowInput::Type::kF32, in2.data(), in2.size() * 4})
                    .ok());
    EXPECT_EQ(Gather(*plan), want) << quant::FormatName(f);
    std::vector<uint8_t> want2(count * plan->row_bytes);
    ASSERT_TRUE(quant::EncodeRows(f, in2.data(), count, dim, want2.data()).ok());
    EXPECT_EQ(Gather(*OpFetchRange({st}, "w_pk", 0, start, start + count)), want2);
    // Rows before `start` never written: zeros.
    auto head = OpFetchRange({st}, "w_pk", 0, 0, start);
    EXPECT_EQ(Gather(*head), std::vector<uint8_t>(start * plan->row_bytes, 0));
  }
}

// A non-finite row names its row counted from the store's first row, as before.
TEST(StoreWritePath, NonFiniteRowIndexCountsFromStart) {
  const uint32_t dim = 64;
  Store st({});
  ASSERT_TRUE(Reg(st, "w", dim, Format::kInt8).ok());
  std::vector<float> in(3000 * dim, 0.5f);
  in[2500 * dim + 3] = std::numeric_limits<float>::infinity();
  uint64_t lsn = 0;
  Status s = OpStoreRows({st, &lsn}, "w_pk", 0, 0, 3000,
                         RowInput{RowInput::Type::kF32, in.data(), in.size() * 4});
  EXPECT_EQ(s.message(), "non-finite value in row 2500");
  EXPECT_EQ(st.Stats().bytes, 0u);  // nothing applied
}

}  // namespace
}  // namespace pion::store
