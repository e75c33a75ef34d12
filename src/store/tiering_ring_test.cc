// The disk tier's reads on a thread that has its own ring (a worker's): GET's
// and V.FETCH's reads of values and namespaces on disk go through it, their
// callbacks run on that thread from Reap() and never inside the call, bit-exact
// and counted; damage and read errors come back as errors; without a ring (or
// with a full one) the same reads go to the tier I/O threads.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/fp16.h"
#include "store/prefix_ops.h"
#include "store/store.h"
#include "store/string_ops.h"
#include "tier/tier_ring.h"

namespace pion::store {
namespace {

constexpr size_t kValue = 256 * 1024;

std::string Value(int i) {
  std::string v(kValue, '\0');
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = static_cast<char>((i * 37 + static_cast<int>(j * 3)) & 0xff);
  return v;
}

class TieringRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tiering-ring-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    st_ = std::make_unique<Store>(StoreConfig{256, 2 * 1024 * 1024});
    ASSERT_TRUE(st_->AttachTier(dir_, 64 << 20, 64 * 1024, 1 << 20, 2).ok());
    auto r = tier::ReadRing::Create(4);
    if (!r.ok()) GTEST_SKIP() << "io_uring not available here: " << r.status().ToString();
    ring_ = std::move(*r);
    tier::ReadRing::SetCurrent(ring_.get());
  }
  void TearDown() override {
    tier::ReadRing::SetCurrent(nullptr);
    ring_.reset();
    st_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Set(const std::string& k, const std::string& v) {
    uint64_t lsn = 0;
    ASSERT_TRUE(store::OpSet({*st_, &lsn}, k, StrValue::Copy(v), SetOptions{}).ok());
  }
  StrRef Raw(const std::string& k) {
    StrRef out;
    EXPECT_TRUE(store::OpGetWith(
                    {*st_}, k, [&out](const StrRef& v) { out = v; }, true)
                    .ok());
    return out;
  }
  void Settle() {
    const uint64_t deadline = MonotonicUs() + 30'000'000;
    while (st_->tier_stats().backlog_bytes > 0 && MonotonicUs() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(st_->tier_stats().backlog_bytes, 0u);
    uint64_t lsn = 0;
    (void)st_->SetMaxBytes(st_->max_bytes(), &lsn);  // applies finished moves
  }
  // Keys whose values are on disk now.
  std::vector<std::string> OnDisk(const std::string& prefix, int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      StrRef v = Raw(prefix + std::to_string(i));
      if (v != nullptr && v->on_disk()) out.push_back(prefix + std::to_string(i));
    }
    return out;
  }
  // Reaps this thread's ring until `*n` reaches `want` (bounded: 30 s).
  void ReapUntil(const std::atomic<int>* n, int want) {
    const uint64_t deadline = MonotonicUs() + 30'000'000;
    while (n->load() < want && MonotonicUs() < deadline) {
      pollfd p{ring_->event_fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      ring_->Reap();
    }
    ASSERT_EQ(n->load(), want);
  }

  std::string dir_;
  std::unique_ptr<Store> st_;
  std::unique_ptr<tier::ReadRing> ring_;
};

TEST_F(TieringRingTest, ValueReadsGoThroughTheThreadsRing) {
  for (int i = 0; i < 24; ++i) Set("k" + std::to_string(i), Value(i));
  Settle();
  std::vector<std::string> keys = OnDisk("k", 24);
  ASSERT_GE(keys.size(), 4u);
  keys.resize(4);  // the ring's depth: all in flight at once
  const Store::TierStats t0 = st_->tier_stats();
  std::atomic<int> ran{0};
  std::vector<std::string> got(keys.size());
  const std::thread::id me = std::this_thread::get_id();
  for (size_t j = 0; j < keys.size(); ++j)
    st_->ReadTiered(keys[j], Raw(keys[j]), [&, j](Result<StrRef> r) {
      EXPECT_EQ(std::this_thread::get_id(), me);  // on the ring's thread
      if (r.ok() && *r) got[j] = std::string((*r)->view());
      ++ran;
    });
  EXPECT_EQ(ran.load(), 0);  // never inside the call
  EXPECT_EQ(ring_->in_flight(), keys.size());
  ReapUntil(&ran, static_cast<int>(keys.size()));
  for (size_t j = 0; j < keys.size(); ++j)
    EXPECT_EQ(got[j], Value(std::stoi(keys[j].substr(1)))) << keys[j];
  const Store::TierStats t1 = st_->tier_stats();
  EXPECT_EQ(t1.reads, t0.reads + keys.size());
  EXPECT_EQ(t1.ring_reads, t0.ring_reads + keys.size());
  EXPECT_EQ(t1.errors, t0.errors);
}

TEST_F(TieringRingTest, AFullRingOrAnotherThreadReadsOnTheIoThreads) {
  for (int i = 0; i < 24; ++i) Set("f" + std::to_string(i), Value(i));
  Settle();
  std::vector<std::string> keys = OnDisk("f", 24);
  ASSERT_GE(keys.size(), 6u);
  keys.resize(6);  // two more than the ring holds
  const uint64_t ring0 = st_->tier_stats().ring_reads;
  std::atomic<int> ran{0}, wrong{0};
  for (const std::string& k : keys)
    st_->ReadTiered(k, Raw(k), [&, k](Result<StrRef> r) {
      if (!r.ok() || !*r || (*r)->view() != Value(std::stoi(k.substr(1)))) ++wrong;
      ++ran;
    });
  EXPECT_EQ(st_->tier_stats().ring_reads, ring0 + 4);
  ReapUntil(&ran, 6);  // the two on the I/O threads finish by themselves
  EXPECT_EQ(wrong.load(), 0);
  // A thread without a ring: the I/O threads.
  std::atomic<int> other{0};
  std::thread([&] {
    st_->ReadTiered(keys[0], Raw(keys[0]), [&](Result<StrRef> r) {
      if (r.ok()) ++other;
    });
  }).join();
  const uint64_t deadline = MonotonicUs() + 30'000'000;
  while (other.load() == 0 && MonotonicUs() < deadline) std::this_thread::yield();
  EXPECT_EQ(other.load(), 1);
  EXPECT_EQ(st_->tier_stats().ring_reads, ring0 + 4);
}

TEST_F(TieringRingTest, DamageAndReadErrorsComeBackAsErrors) {
  for (int i = 0; i < 24; ++i) Set("d" + std::to_string(i), Value(i));
  Settle();
  std::vector<std::string> keys = OnDisk("d", 24);
  ASSERT_GE(keys.size(), 2u);
  StrRef bad = Raw(keys[0]);
  ASSERT_TRUE(st_->tier_file_for_test()->CorruptForTest(*bad->extent).ok());
  std::atomic<int> ran{0};
  Code code = Code::kOk;
  st_->ReadTiered(keys[0], bad, [&](Result<StrRef> r) {
    code = r.status().code();
    ++ran;
  });
  ReapUntil(&ran, 1);
  EXPECT_EQ(code, Code::kCorruption);
  st_->tier_file_for_test()->FailNextReads(1);
  st_->ReadTiered(keys[1], Raw(keys[1]), [&](Result<StrRef> r) {
    code = r.status().code();
    ++ran;
  });
  ReapUntil(&ran, 2);
  EXPECT_EQ(code, Code::kIOError);
  EXPECT_EQ(st_->tier_stats().errors, 2u);
}

// ---- a namespace on disk: V.FETCH's check of its extent

constexpr uint32_t kNsDim = 256;
constexpr uint64_t kNsRows = 1024;  // 512 KiB of fp16 rows

TEST_F(TieringRingTest, ANamespaceCheckGoesThroughTheThreadsRing) {
  std::vector<uint16_t> rows(kNsRows * kNsDim);
  for (size_t j = 0; j < rows.size(); ++j) rows[j] = F32ToF16(static_cast<float>(j % 251) / 251.0f);
  for (int i = 0; i < 8; ++i) {
    const std::string name = "ns" + std::to_string(i);
    RegisterArgs a;
    a.ns = name;
    a.kv_dim = kNsDim;
    a.fmt = quant::Format::kFp16;
    uint64_t lsn = 0;
    ASSERT_TRUE(OpRegister({*st_, &lsn}, a).ok());
    ASSERT_TRUE(OpStoreRows({*st_, &lsn}, name + "_pk", 0, 0, kNsRows,
                            RowInput{RowInput::Type::kF16, rows.data(), rows.size() * 2})
                    .ok());
  }
  Settle();
  std::optional<Store::TierCheck> chk;
  std::string sid;
  for (int i = 0; i < 8 && !chk; ++i) {
    sid = "ns" + std::to_string(i) + "_pk";
    chk = st_->TierCheckFor(sid);
  }
  ASSERT_TRUE(chk.has_value());
  const Store::TierStats t0 = st_->tier_stats();
  std::atomic<int> ran{0};
  Status applied;
  st_->ReadTierCheck(*chk, [&](Result<OwnedBuffer> buf, size_t at) {
    applied = st_->ApplyTierCheck(*chk, std::move(buf), at);
    ++ran;
  });
  EXPECT_EQ(ran.load(), 0);
  ReapUntil(&ran, 1);
  EXPECT_TRUE(applied.ok()) << applied.ToString();
  const Store::TierStats t1 = st_->tier_stats();
  EXPECT_EQ(t1.reads, t0.reads + 1);
  EXPECT_EQ(t1.ring_reads, t0.ring_reads + 1);
  auto p = OpFetchRange({*st_}, sid, 0, 0, kNsRows);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
}

}  // namespace
}  // namespace pion::store
