// The worker's ring of tier reads: many checked reads in flight from one thread,
// their callbacks run by Reap()/Drain() on that thread, bit-exact; damage and
// injected errors surface as errors; a full ring refuses (the caller reads the
// extent another way) and leaves the callback with the caller.
#include "tier/tier_ring.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pion::tier {
namespace {

class TierRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tier-ring-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto f = TierFile::Open(dir_, 256 << 20);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = *f;
    auto r = ReadRing::Create(8);
    if (!r.ok()) GTEST_SKIP() << "io_uring not available here: " << r.status().ToString();
    ring_ = std::move(*r);
  }
  void TearDown() override {
    ring_.reset();
    file_.reset();
    std::filesystem::remove_all(dir_);
  }

  static std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  }
  ExtentRef Put(const std::string& key, const std::vector<uint8_t>& v) {
    ExtentRef x = file_->Allocate(key, v.size());
    EXPECT_NE(x, nullptr);
    EXPECT_TRUE(file_->Write(*x, v.data(), v.size()).ok());
    return x;
  }
  // Reaps until `n` callbacks ran, waiting on the eventfd (bounded: 10 s).
  void ReapUntil(const size_t* ran, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (*ran < n && std::chrono::steady_clock::now() < deadline) {
      pollfd p{ring_->event_fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      ring_->Reap();
    }
    ASSERT_EQ(*ran, n) << "reads still in flight: " << ring_->in_flight();
  }

  std::string dir_;
  std::shared_ptr<TierFile> file_;
  std::unique_ptr<ReadRing> ring_;
};

TEST_F(TierRingTest, ManyReadsInFlightComeBackBitExact) {
  const std::vector<size_t> sizes = {0, 1, 4031, 4097, 64 << 10, (1 << 20) + 3, 3 << 20};
  std::vector<std::vector<uint8_t>> vals;
  std::vector<ExtentRef> xs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    vals.push_back(Bytes(sizes[i], static_cast<uint32_t>(i + 1)));
    xs.push_back(Put("k" + std::to_string(i), vals.back()));
  }
  size_t ran = 0;
  std::vector<bool> ok(sizes.size(), false);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ReadRing::Done d = [&, i](Result<OwnedBuffer> r, size_t at) {
      ++ran;
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const uint8_t* p = static_cast<const uint8_t*>(r->data()) + at + xs[i]->header_bytes;
      ok[i] = sizes[i] == 0 || std::memcmp(p, vals[i].data(), sizes[i]) == 0;
    };
    ASSERT_TRUE(ring_->Read(xs[i], d));
    EXPECT_FALSE(static_cast<bool>(d));  // taken
  }
  EXPECT_EQ(ran, 0u);  // callbacks never run inside Read
  ReapUntil(&ran, sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(ok[i]) << "value " << i;
  EXPECT_EQ(ring_->in_flight(), 0u);
  EXPECT_GE(ReadRing::total_reads(), sizes.size());
}

TEST_F(TierRingTest, AFullRingRefusesAndLeavesTheCallback) {
  auto v = Bytes(64 << 10, 7);
  ExtentRef x = Put("full", v);
  size_t ran = 0;
  for (unsigned i = 0; i < ring_->depth(); ++i) {
    ReadRing::Done d = [&](Result<OwnedBuffer> r, size_t) {
      EXPECT_TRUE(r.ok());
      ++ran;
    };
    ASSERT_TRUE(ring_->Read(x, d));
  }
  bool called = false;
  ReadRing::Done extra = [&](Result<OwnedBuffer>, size_t) { called = true; };
  EXPECT_FALSE(ring_->Read(x, extra));
  ASSERT_TRUE(static_cast<bool>(extra));  // still the caller's
  extra(Status::Busy("x"), 0);
  EXPECT_TRUE(called);
  ReapUntil(&ran, ring_->depth());
  // Room again.
  ReadRing::Done again = [&](Result<OwnedBuffer> r, size_t) {
    EXPECT_TRUE(r.ok());
    ++ran;
  };
  EXPECT_TRUE(ring_->Read(x, again));
  ReapUntil(&ran, ring_->depth() + 1);
}

TEST_F(TierRingTest, DamageAndInjectedErrorsAreErrorsNeverBytes) {
  auto v = Bytes(100 << 10, 9);
  ExtentRef x = Put("bad", v);
  ASSERT_TRUE(file_->CorruptForTest(*x).ok());
  size_t ran = 0;
  Code got = Code::kOk;
  ReadRing::Done d = [&](Result<OwnedBuffer> r, size_t) {
    ++ran;
    got = r.status().code();
  };
  ASSERT_TRUE(ring_->Read(x, d));
  ReapUntil(&ran, 1);
  EXPECT_EQ(got, Code::kCorruption);

  ExtentRef y = Put("good", v);
  file_->FailNextReads(1);
  ReadRing::Done e = [&](Result<OwnedBuffer> r, size_t) {
    ++ran;
    got = r.status().code();
  };
  ASSERT_TRUE(ring_->Read(y, e));
  ReapUntil(&ran, 2);
  EXPECT_EQ(got, Code::kIOError);
  // The next read of the same extent is fine.
  ReadRing::Done f = [&](Result<OwnedBuffer> r, size_t) {
    ++ran;
    got = r.status().code();
  };
  ASSERT_TRUE(ring_->Read(y, f));
  ReapUntil(&ran, 3);
  EXPECT_EQ(got, Code::kOk);
}

TEST_F(TierRingTest, DrainAndDestructionRunEveryCallback) {
  auto v = Bytes(256 << 10, 11);
  ExtentRef x = Put("drain", v);
  size_t ran = 0;
  for (int i = 0; i < 4; ++i) {
    ReadRing::Done d = [&](Result<OwnedBuffer> r, size_t) {
      EXPECT_TRUE(r.ok());
      ++ran;
    };
    ASSERT_TRUE(ring_->Read(x, d));
  }
  ring_->Drain();
  EXPECT_EQ(ran, 4u);
  EXPECT_EQ(ring_->in_flight(), 0u);
  for (int i = 0; i < 3; ++i) {
    ReadRing::Done d = [&](Result<OwnedBuffer> r, size_t) {
      EXPECT_TRUE(r.ok());
      ++ran;
    };
    ASSERT_TRUE(ring_->Read(x, d));
  }
  ring_.reset();
  EXPECT_EQ(ran, 7u);
}

TEST_F(TierRingTest, TheCurrentRingIsPerThread) {
  EXPECT_EQ(ReadRing::Current(), nullptr);
  ReadRing::SetCurrent(ring_.get());
  EXPECT_EQ(ReadRing::Current(), ring_.get());
  ReadRing* other = ring_.get();
  std::thread([&] { other = ReadRing::Current(); }).join();
  EXPECT_EQ(other, nullptr);
  ring_.reset();  // clears it on this thread
  EXPECT_EQ(ReadRing::Current(), nullptr);
}

}  // namespace
}  // namespace pion::tier
