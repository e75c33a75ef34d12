// The disk tier in the keyspace: moves under a small budget, reads of every
// kind while moves, promotions and overwrites run on other threads (TSan runs
// this), write failures that keep the value in RAM, damaged extents dropped.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/fp16.h"
#include "store/key_ops.h"
#include "store/prefix_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::store {
namespace {

constexpr size_t kValue = 256 * 1024;

std::string Value(int i, int gen = 0) {
  std::string v(kValue, '\0');
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = static_cast<char>((i * 131 + gen * 17 + static_cast<int>(j)) & 0xff);
  return v;
}

class TieringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tiering-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    st_ = std::make_unique<Store>(StoreConfig{256, 2 * 1024 * 1024});
    ASSERT_TRUE(st_->AttachTier(dir_, 64 << 20, 64 * 1024, 1 << 20, 2).ok());
  }
  void TearDown() override {
    st_.reset();
    std::filesystem::remove_all(dir_);
  }
  Status Set(const std::string& k, const std::string& v) {
    uint64_t lsn = 0;
    return store::OpSet({*st_, &lsn}, k, StrValue::Copy(v), SetOptions{}).status();
  }
  // The value as the keyspace holds it (on disk: not read), as GET's async path sees it.
  Result<StrRef> Raw(const std::string& k) {
    StrRef out;
    Status st = store::OpGetWith(
        {*st_}, k, [&out](const StrRef& v) { out = v; }, /*tiered_as_is=*/true);
    if (!st.ok()) return st;
    return out;
  }
  std::string Get(const std::string& k) {
    auto r = store::OpGet({*st_}, k);
    return r.ok() && *r ? std::string((*r)->view()) : "<none>";
  }
  // Waits (bounded) until every queued write was applied.
  void Settle() {
    const uint64_t deadline = MonotonicUs() + 30'000'000;
    while (st_->tier_stats().backlog_bytes > 0 && MonotonicUs() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(st_->tier_stats().backlog_bytes, 0u);
    uint64_t lsn = 0;
    (void)st_->SetMaxBytes(st_->max_bytes(),
                           &lsn);  // applies finished moves under the keyspace lock
  }

  // d0..d15 written over the RAM budget (so moved to the tier), then d0's extent
  // damaged; *v is d0's value.
  void DamagedOnDisk(StrRef* v) {
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(Set("d" + std::to_string(i), Value(i)).ok());
    Settle();
    auto r = Raw("d0");
    ASSERT_TRUE(r.ok() && *r && (*r)->on_disk());
    ASSERT_TRUE(st_->tier_file_for_test()->CorruptForTest(*(*r)->extent).ok());
    *v = *r;
  }

  std::string dir_;
  std::unique_ptr<Store> st_;
};

TEST_F(TieringTest, ValuesOverTheBudgetMoveAndReadBack) {
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(Set("k" + std::to_string(i), Value(i)).ok());
  Settle();
  Store::TierStats t = st_->tier_stats();
  EXPECT_GE(t.entries, 24u);
  EXPECT_EQ(t.writes, t.entries);
  EXPECT_LE(st_->used_bytes(), 2u * 1024 * 1024);
  EXPECT_EQ(st_->KeyStats().evicted_keys, 0u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(Get("k" + std::to_string(i)), Value(i)) << i;
  // The direct read path, then promotion.
  auto v = Raw("k0");
  ASSERT_TRUE(v.ok() && *v && (*v)->on_disk());
  std::atomic<bool> done{false};
  StrRef fresh;
  st_->ReadTiered("k0", *v, [&](Result<StrRef> r) {
    ASSERT_TRUE(r.ok());
    fresh = *r;
    done = true;
  });
  const uint64_t deadline = MonotonicUs() + 30'000'000;
  while (!done && MonotonicUs() < deadline) std::this_thread::yield();
  ASSERT_TRUE(done);
  EXPECT_EQ(std::string(fresh->view()), Value(0));
  st_->PromoteTiered("k0", *v, fresh);
  EXPECT_EQ(st_->tier_stats().promotions, 1u);
  auto again = Raw("k0");
  EXPECT_FALSE((*again)->tiered());
  // Every other read path reads a value on disk with a checked read, not the mapping.
  auto k1 = Raw("k1");
  ASSERT_TRUE(k1.ok() && *k1 && (*k1)->on_disk());
  const uint64_t reads = st_->tier_stats().reads;
  EXPECT_EQ(Get("k1"), Value(1));
  EXPECT_EQ(st_->tier_stats().reads, reads + 1);
}

TEST_F(TieringTest, ConcurrentReadsWritesAndMoves) {
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(Set("c" + std::to_string(i), Value(i)).ok());
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&, t] {
      for (int round = 0; round < 200 && !stop; ++round) {
        const int i = (round * 7 + t) % 24;
        // Half the reads as GET's async path sees values, half as every other read.
        auto r = round % 2 == 0 ? Raw("c" + std::to_string(i))
                                : store::OpGet({*st_}, "c" + std::to_string(i));
        if (!r.ok() || !*r) continue;
        std::string got((*r)->view());
        if (got != Value(i, 0) && got != Value(i, 1)) ++wrong;
        if ((*r)->on_disk()) {
          // The read completes on a tier I/O thread; the promotion runs back on
          // this thread, as the server runs it on the worker (a promotion inside
          // the callback can wait for the tier's writes, which need that thread).
          struct Read {
            std::atomic<bool> done{false};
            StrRef fresh;
          };
          auto rd = std::make_shared<Read>();  // outlives a callback that comes too late
          st_->ReadTiered("c" + std::to_string(i), *r, [rd](Result<StrRef> f) {
            if (f.ok()) rd->fresh = *f;
            rd->done = true;
          });
          const uint64_t deadline = MonotonicUs() + 30'000'000;
          while (!rd->done && MonotonicUs() < deadline) std::this_thread::yield();
          if (!rd->done) {
            stop = true;
            ++wrong;
            continue;
          }
          const StrRef& fresh = rd->fresh;
          if (fresh != nullptr) {
            std::string b(fresh->view());
            if (b != Value(i, 0) && b != Value(i, 1)) ++wrong;
            st_->PromoteTiered("c" + std::to_string(i), *r, fresh);
          }
        }
      }
    });
  for (int round = 0; round < 48; ++round)
    ASSERT_TRUE(Set("c" + std::to_string(round % 24), Value(round % 24, 1)).ok());
  for (auto& th : readers) th.join();
  EXPECT_EQ(wrong.load(), 0);
  Settle();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(Get("c" + std::to_string(i)), Value(i, 1)) << i;
}

TEST_F(TieringTest, AFailedWriteKeepsTheValueInRam) {
  st_->tier_file_for_test()->FailNextWrites(1000);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(Set("f" + std::to_string(i), Value(i)).ok());
  Settle();
  Store::TierStats t = st_->tier_stats();
  EXPECT_GT(t.errors, 0u);
  EXPECT_EQ(t.entries, 0u);  // every failed move went back to RAM
  EXPECT_EQ(t.bytes, 0u);
  // Moves pause after a failure: what did not fit was evicted, never a wrong byte.
  uint64_t kept = 0;
  for (int i = 0; i < 16; ++i) {
    std::string got = Get("f" + std::to_string(i));
    if (got != "<none>") {
      EXPECT_EQ(got, Value(i)) << i;
      ++kept;
    }
  }
  EXPECT_EQ(kept + st_->KeyStats().evicted_keys, 16u);
  st_->tier_file_for_test()->FailNextWrites(0);
}

TEST_F(TieringTest, ADamagedExtentIsDroppedAsAnEviction) {
  StrRef v;
  ASSERT_NO_FATAL_FAILURE(DamagedOnDisk(&v));
  std::atomic<bool> done{false};
  Status seen;
  st_->ReadTiered("d0", v, [&](Result<StrRef> r) {
    seen = r.status();
    done = true;
  });
  const uint64_t deadline = MonotonicUs() + 30'000'000;
  while (!done && MonotonicUs() < deadline) std::this_thread::yield();
  ASSERT_TRUE(done);
  EXPECT_EQ(seen.code(), Code::kCorruption);
  // Every read path refuses the damaged bytes: the entry is dropped.
  EXPECT_EQ(Get("d0"), "<none>");
  EXPECT_EQ(st_->KeyStats().evicted_keys, 1u);
  EXPECT_EQ(st_->tier_stats().errors, 2u);  // the async read and the checked one
}

TEST_F(TieringTest, AnEditOfADamagedTieredValueDropsItAndCopiesNoByte) {
  // An edit (APPEND, SETRANGE, the INCR family...) reads the bytes it keeps
  // with the tier's checked read, as GET does: a damaged extent is never
  // copied into the edited value; it is dropped as the tier drops entries,
  // and the edit then finds no key.
  StrRef v;
  ASSERT_NO_FATAL_FAILURE(DamagedOnDisk(&v));
  uint64_t lsn = 0;
  auto n = store::OpAppend({*st_, &lsn}, "d0", "tail");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 4u);
  EXPECT_TRUE(Get("d0") == "tail");  // not EXPECT_EQ: 256 KiB on failure
  EXPECT_EQ(st_->KeyStats().evicted_keys, 1u);
  EXPECT_EQ(st_->tier_stats().errors, 1u);
  // An intact tiered value is edited from its checked bytes.
  auto w = Raw("d1");
  ASSERT_TRUE(w.ok() && *w && (*w)->on_disk());
  n = store::OpAppend({*st_, &lsn}, "d1", "x");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kValue + 1);
  EXPECT_TRUE(Get("d1") == Value(1) + "x");  // not EXPECT_EQ: 256 KiB on failure
}

TEST_F(TieringTest, AFullTierDropsItsColdestAndShrinkingDropsMore) {
  st_->SetTierMaxBytes(8 * (kValue + 4096));
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Set("s" + std::to_string(i), Value(i)).ok());
    Settle();
  }
  Store::TierStats t = st_->tier_stats();
  EXPECT_LE(t.bytes, 8 * (kValue + 4096));
  EXPECT_GT(t.evictions, 0u);
  EXPECT_EQ(Get("s0"), "<none>");
  EXPECT_EQ(Get("s39"), Value(39));
  st_->SetTierMaxBytes(2 * (kValue + 4096));
  EXPECT_LE(st_->tier_stats().bytes, 2 * (kValue + 4096));
}

TEST_F(TieringTest, AnEditOfTheColdestTieredKeyKeepsItWhileTheFullTierMakesRoom) {
  // RAM and the tier both full. An APPEND to the tier's coldest key copies it
  // into RAM, which moves a RAM value to the tier, which must drop its
  // coldest: another key, never the one being edited (Slice::RoomLocked
  // holds it), whose entry the edit then replaces.
  st_->SetTierMaxBytes(8 * (kValue + 4096));
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Set("s" + std::to_string(i), Value(i)).ok());
    Settle();
  }
  int coldest = -1;
  for (int i = 0; i < 40 && coldest < 0; ++i) {
    KeyObject o = store::OpObject({*st_}, "s" + std::to_string(i));  // no touch
    if (o.value != nullptr && o.value->tiered()) coldest = i;
  }
  ASSERT_GE(coldest, 0);
  const std::string key = "s" + std::to_string(coldest);
  const uint64_t evictions = st_->tier_stats().evictions;
  uint64_t lsn = 0;
  auto n = store::OpAppend({*st_, &lsn}, key, "x");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kValue + 1);
  EXPECT_TRUE(Get(key) == Value(coldest) + "x");  // not EXPECT_EQ: 256 KiB on failure
  Settle();
  EXPECT_GT(st_->tier_stats().evictions, evictions);
  EXPECT_TRUE(Get(key) == Value(coldest) + "x");
}

// ---- namespaces: 1024 fp16 rows of 256 (512 KiB) in layer 0 of the K side

constexpr uint32_t kNsDim = 256;
constexpr uint64_t kNsRows = 1024;

std::vector<uint16_t> NsRows(int i) {
  std::vector<uint16_t> v(kNsRows * kNsDim);
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = F32ToF16(static_cast<float>((j * 7 + static_cast<size_t>(i) * 13) % 251) / 251.0f);
  return v;
}

class TieredNamespaceTest : public TieringTest {
 protected:
  // Eight namespaces (4 MiB) under the 2 MiB budget: some move to the tier.
  void Fill() {
    for (int i = 0; i < 8; ++i) {
      const std::string name = Name(i);  // a.ns is a view: the name must outlive it
      RegisterArgs a;
      a.ns = name;
      a.kv_dim = kNsDim;
      a.fmt = quant::Format::kFp16;
      uint64_t lsn = 0;
      ASSERT_TRUE(OpRegister({*st_, &lsn}, a).ok());
      auto v = NsRows(i);
      ASSERT_TRUE(OpStoreRows({*st_, &lsn}, Name(i) + "_pk", 0, 0, kNsRows,
                              RowInput{RowInput::Type::kF16, v.data(), v.size() * 2})
                      .ok());
    }
    Settle();
  }
  static std::string Name(int i) { return "ns" + std::to_string(i); }
  bool OnDisk(int i) {
    NamespaceInfo info;
    return OpDescribe({*st_}, Name(i), &info) && info.on_disk;
  }
  int FirstOnDisk() {
    for (int i = 0; i < 8; ++i)
      if (OnDisk(i) && st_->namespace_extent_for_test(Name(i)) != nullptr) return i;
    return -1;
  }
  // V.FETCH's plan, gathered: the rows as the client would get them.
  Result<std::vector<uint16_t>> Fetch(int i) {
    auto p = OpFetchRange({*st_}, Name(i) + "_pk", 0, 0, kNsRows);
    if (!p.ok()) return p.status();
    std::vector<uint16_t> out(kNsRows * kNsDim, 0);
    uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
    for (const FetchSegment& s : p->segments) {
      const size_t n = s.rows * p->row_bytes;
      if (s.data != nullptr) std::memcpy(dst, s.data, n);
      dst += n;
    }
    return out;
  }
};

TEST_F(TieredNamespaceTest, AReadChecksTheExtentAndPromotes) {
  Fill();
  const int i = FirstOnDisk();
  ASSERT_GE(i, 0);
  const Store::TierStats t0 = st_->tier_stats();
  auto got = Fetch(i);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, NsRows(i));
  const Store::TierStats t1 = st_->tier_stats();
  EXPECT_EQ(t1.reads, t0.reads + 1);  // one checked read of the whole extent
  EXPECT_EQ(t1.promotions, t0.promotions + 1);
  EXPECT_FALSE(OnDisk(i));
  EXPECT_EQ(st_->namespace_extent_for_test(Name(i)), nullptr);
  EXPECT_LE(st_->used_bytes(), st_->max_bytes());
  // In RAM now: the next read reads nothing from disk.
  got = Fetch(i);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, NsRows(i));
  EXPECT_EQ(st_->tier_stats().reads, t1.reads);
  Settle();
  for (int k = 0; k < 8; ++k) {
    auto all = Fetch(k);
    ASSERT_TRUE(all.ok()) << k << ": " << all.status().ToString();
    EXPECT_EQ(*all, NsRows(k)) << k;
  }
  EXPECT_EQ(st_->KeyStats().evicted_keys, 0u);
}

TEST_F(TieredNamespaceTest, TooBigForTheBudgetIsServedCheckedWithoutPromotion) {
  Fill();
  uint64_t lsn = 0;
  ASSERT_TRUE(st_->SetMaxBytes(256 * 1024, &lsn).ok());  // no namespace fits any more
  Settle();
  const int i = FirstOnDisk();
  ASSERT_GE(i, 0);
  for (int round = 0; round < 2; ++round) {
    const Store::TierStats t0 = st_->tier_stats();
    auto got = Fetch(i);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, NsRows(i));
    EXPECT_EQ(st_->tier_stats().reads, t0.reads + 1);  // checked on every read
    EXPECT_EQ(st_->tier_stats().promotions, t0.promotions);
    EXPECT_TRUE(OnDisk(i));
  }
}

TEST_F(TieredNamespaceTest, AReadErrorChangesNothingAndDamageDropsTheNamespace) {
  Fill();
  const int i = FirstOnDisk();
  ASSERT_GE(i, 0);
  st_->tier_file_for_test()->FailNextReads(1);
  auto got = Fetch(i);
  EXPECT_EQ(got.status().code(), Code::kIOError);
  EXPECT_TRUE(OnDisk(i));
  tier::ExtentRef x = st_->namespace_extent_for_test(Name(i));
  ASSERT_NE(x, nullptr);
  ASSERT_TRUE(st_->tier_file_for_test()->CorruptForTest(*x).ok());
  x.reset();
  got = Fetch(i);
  EXPECT_EQ(got.status().code(), Code::kNotFound);  // never a wrong byte
  NamespaceInfo info;
  EXPECT_FALSE(OpDescribe({*st_}, Name(i), &info));
  EXPECT_EQ(st_->tier_stats().errors, 2u);
  EXPECT_GE(st_->tier_stats().evictions, 1u);
}

}  // namespace
}  // namespace pion::store
