// The tier file: extents round-trip bit-exact, damage is detected (never a
// wrong byte), space is reused and coalesced, the bound holds, and injected
// I/O errors surface as errors.
#include "tier/tier_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace pion::tier {
namespace {

class TierFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tier-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  }
  static std::string_view View(const OwnedBuffer& b, const Extent& x) {
    return {static_cast<const char*>(b.data()) + x.header_bytes, x.value_len};
  }

  std::string dir_;
};

TEST_F(TierFileTest, RoundTripsValuesOfEverySize) {
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  for (size_t n : {size_t{0}, size_t{1}, size_t{4031}, size_t{4032}, size_t{4097}, size_t{1} << 20,
                   (size_t{9} << 20) + 3}) {
    auto v = Bytes(n, static_cast<uint32_t>(n));
    std::string key = "key:" + std::to_string(n);
    ExtentRef x = (*f)->Allocate(key, n);
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->offset % kBlock, 0u);
    EXPECT_EQ(x->length % kBlock, 0u);
    EXPECT_EQ(x->length, ExtentBytes(key.size(), n));
    ASSERT_TRUE((*f)->Write(*x, v.data(), n).ok());
    auto r = (*f)->Read(*x);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(View(*r, *x), std::string_view(reinterpret_cast<const char*>(v.data()), n));
    // The mapping shows the same bytes.
    if (n > 0) {
      EXPECT_EQ(std::memcmp(x->mapped(), v.data(), n), 0);
    }
    // An index entry that names another key is a mismatch, never its bytes.
    Extent other;
    other.offset = x->offset;
    other.length = x->length;
    other.header_bytes = x->header_bytes;
    other.value_len = x->value_len;
    other.key = key + "x";
    EXPECT_FALSE((*f)->Read(other).ok());
  }
}

TEST_F(TierFileTest, BigReadsInPiecesCheckEveryByte) {
  auto f = TierFile::Open(dir_, 256 << 20);
  ASSERT_TRUE(f.ok());
  // Sizes around the piece boundaries (1 MiB pieces up to 16 MiB, bigger ones above).
  for (size_t n : {(size_t{4} << 20) - 4096, (size_t{16} << 20) + 1, (size_t{33} << 20) + 777}) {
    auto v = Bytes(n, static_cast<uint32_t>(n) * 7);
    ExtentRef x = (*f)->Allocate("big" + std::to_string(n), n);
    ASSERT_NE(x, nullptr);
    ASSERT_TRUE((*f)->Write(*x, v.data(), n).ok());
    const uint64_t pieces = (*f)->piece_reads();
    auto r = (*f)->Read(*x);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(View(*r, *x), std::string_view(reinterpret_cast<const char*>(v.data()), n));
    if ((*f)->direct() && TierFile::PieceReadsSupported()) {
      EXPECT_EQ((*f)->piece_reads(), pieces + 1);
    }
    // A flipped byte in the value is caught.
    ASSERT_TRUE((*f)->CorruptForTest(*x).ok());
    auto bad = (*f)->Read(*x);
    EXPECT_EQ(bad.status().code(), Code::kCorruption);
  }
}

TEST_F(TierFileTest, ReadsIntoRecycledBlocks) {
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok());
  BufferRecycler& rec = BufferRecycler::Global();
  rec.set_max_bytes(64 << 20);
  auto v = Bytes(1 << 20, 9);
  ExtentRef x = (*f)->Allocate("k", v.size());
  ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  // A block with only 64-byte alignment: the read is placed at the next 4 KiB.
  void* block = std::aligned_alloc(64, (2 << 20) + 64 * 3);
  rec.Put(static_cast<uint8_t*>(block), (2 << 20) + 64 * 3);
  const uint64_t hits = rec.hits();
  size_t at = 12345;
  auto r = (*f)->Read(*x, &at);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(rec.hits(), hits + 1);
  EXPECT_EQ((reinterpret_cast<uintptr_t>(r->data()) + at) % kBlock, 0u);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(r->data()) + at + x->header_bytes, v.data(),
                        v.size()),
            0);
  rec.set_max_bytes(0);
}

TEST_F(TierFileTest, LongKeysTakeMoreHeaderBlocks) {
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok());
  std::string key(10000, 'k');
  EXPECT_EQ(HeaderBytes(key.size()), 3 * kBlock);
  auto v = Bytes(5000, 7);
  ExtentRef x = (*f)->Allocate(key, v.size());
  ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  auto r = (*f)->Read(*x);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::memcmp(View(*r, *x).data(), v.data(), v.size()), 0);
}

TEST_F(TierFileTest, DamageIsAnErrorNotAWrongByte) {
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok());
  auto v = Bytes(100000, 3);
  ExtentRef x = (*f)->Allocate("k", v.size());
  ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  ASSERT_TRUE((*f)->CorruptForTest(*x).ok());
  auto r = (*f)->Read(*x);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("checksum"), std::string::npos) << r.status().ToString();
}

TEST_F(TierFileTest, SpaceIsBoundedReusedAndCoalesced) {
  auto f = TierFile::Open(dir_, 10 * kBlock);
  ASSERT_TRUE(f.ok());
  // Each extent: one header block + 2 value blocks.
  std::vector<ExtentRef> xs;
  for (int i = 0; i < 3; ++i) xs.push_back((*f)->Allocate("k", 2 * kBlock));
  for (auto& x : xs) ASSERT_NE(x, nullptr);
  EXPECT_EQ((*f)->used_bytes(), 9 * kBlock);
  EXPECT_EQ((*f)->Allocate("k", 2 * kBlock), nullptr);  // 12 blocks > 10
  EXPECT_EQ((*f)->extents(), 3u);
  const uint64_t first = xs[0]->offset, second = xs[1]->offset;
  xs[0].reset();
  xs[1].reset();  // two neighbours: one free run of 6 blocks
  EXPECT_EQ((*f)->used_bytes(), 3 * kBlock);
  ExtentRef big = (*f)->Allocate("k", 4 * kBlock);  // 5 blocks: fits the coalesced run
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->offset, std::min(first, second));
  (*f)->set_max_bytes(6 * kBlock);
  EXPECT_EQ((*f)->Allocate("k", 0), nullptr);  // 8 used + 1 > 6
}

TEST_F(TierFileTest, InjectedErrorsSurface) {
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok());
  auto v = Bytes(5000, 1);
  ExtentRef x = (*f)->Allocate("k", v.size());
  (*f)->FailNextWrites(1);
  EXPECT_FALSE((*f)->Write(*x, v.data(), v.size()).ok());
  ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  (*f)->FailNextReads(1);
  EXPECT_FALSE((*f)->Read(*x).ok());
  EXPECT_TRUE((*f)->Read(*x).ok());
}

TEST_F(TierFileTest, OpenEmptiesTheFileAndRefusesBadBounds) {
  {
    auto f = TierFile::Open(dir_, 1 << 20);
    ASSERT_TRUE(f.ok());
    auto v = Bytes(5000, 1);
    ExtentRef x = (*f)->Allocate("k", v.size());
    ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  }
  auto f = TierFile::Open(dir_, 1 << 20);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + kFileName), 0u);
  EXPECT_FALSE(TierFile::Open(dir_, 0).ok());
  EXPECT_FALSE(TierFile::Open(dir_, kMaxTierBytes + 1).ok());
}

}  // namespace
}  // namespace pion::tier
