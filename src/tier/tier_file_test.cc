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

TEST_F(TierFileTest, AReadThatFindsNoBlockLeavesOneForTheNext) {
  // A miss allocates a block that goes back to the recycler when the value is
  // released, big enough for the next read of the same extent: a second read
  // then reuses it (its pages already mapped) instead of a fresh mapping.
  auto f = TierFile::Open(dir_, 64 << 20);
  ASSERT_TRUE(f.ok());
  BufferRecycler& rec = BufferRecycler::Global();
  rec.Clear();
  rec.set_max_bytes(64 << 20);
  auto v = Bytes(1 << 20, 7);
  ExtentRef x = (*f)->Allocate("k", v.size());
  ASSERT_TRUE((*f)->Write(*x, v.data(), v.size()).ok());
  const uint64_t hits = rec.hits(), misses = rec.misses();
  const void* first = nullptr;
  {
    size_t at = 0;
    auto r = (*f)->Read(*x, &at);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(rec.misses(), misses + 1);
    EXPECT_EQ((reinterpret_cast<uintptr_t>(r->data()) + at) % kBlock, 0u);
    first = r->data();
    EXPECT_EQ(rec.cached_bytes(), 0u);
  }  // released: back to the recycler
  EXPECT_GE(rec.cached_bytes(), x->length + kBlock);
  size_t at = 0;
  auto r = (*f)->Read(*x, &at);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(rec.hits(), hits + 1);
  EXPECT_EQ(r->data(), first);
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

// A restart (docs/tier_format.md §3): the file is kept, extents are adopted
// after their header matched the reference, a mismatch is refused, and the
// space no adopted extent holds is free afterwards (reused from the start).
TEST_F(TierFileTest, AdoptsReferencedExtentsAndFreesTheRest) {
  std::vector<ExtentId> ids;
  std::vector<std::vector<uint8_t>> values;
  {
    auto f = TierFile::Open(dir_, 64 << 20);
    ASSERT_TRUE(f.ok());
    std::vector<ExtentRef> keep;
    for (int i = 0; i < 4; ++i) {
      values.push_back(Bytes(10000 + i, static_cast<uint32_t>(i)));
      ExtentRef x = (*f)->Allocate("k" + std::to_string(i), values.back().size());
      ASSERT_NE(x, nullptr);
      ASSERT_TRUE((*f)->Write(*x, values.back().data(), values.back().size()).ok());
      EXPECT_EQ(x->seq, static_cast<uint64_t>(i + 1));
      ids.push_back({x->offset, x->length, x->header_bytes, x->value_len, x->value_crc, x->seq});
      keep.push_back(std::move(x));
    }
    ASSERT_TRUE((*f)->Sync().ok());
    (*f)->KeepFreedExtents();  // stopping: what is freed stays on disk
  }
  auto f = TierFile::Open(dir_, 64 << 20, /*adopt=*/true);
  ASSERT_TRUE(f.ok());
  // A wrong key, CRC or sequence number is refused (never a wrong byte).
  EXPECT_EQ((*f)->Adopt("k9", ids[0]).status().code(), Code::kCorruption);
  ExtentId wrong = ids[0];
  wrong.value_crc ^= 1;
  EXPECT_EQ((*f)->Adopt("k0", wrong).status().code(), Code::kCorruption);
  wrong = ids[0];
  wrong.seq += 7;
  EXPECT_EQ((*f)->Adopt("k0", wrong).status().code(), Code::kCorruption);
  wrong = ids[3];
  wrong.offset += 1 << 20;  // beyond the old file
  EXPECT_EQ((*f)->Adopt("k3", wrong).status().code(), Code::kCorruption);
  // k0 and k2 adopted; k1 and k3 are not referenced any more.
  auto a0 = (*f)->Adopt("k0", ids[0]);
  auto a2 = (*f)->Adopt("k2", ids[2]);
  ASSERT_TRUE(a0.ok()) << a0.status().ToString();
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ((*f)->Adopt("k0", ids[0]).status().code(), Code::kCorruption);  // twice
  EXPECT_EQ((*f)->used_bytes(), ids[0].length + ids[2].length);
  // Allocated while adopting: after the old file's space.
  ExtentRef during = (*f)->Allocate("new", 5000);
  ASSERT_NE(during, nullptr);
  EXPECT_GE(during->offset, ids[3].offset + ids[3].length);
  (*f)->FinishAdopt();
  for (int i : {0, 2}) {
    const ExtentRef& x = i == 0 ? *a0 : *a2;
    auto r = (*f)->Read(*x);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(View(*r, *x),
              std::string_view(reinterpret_cast<const char*>(values[i].data()), values[i].size()));
    EXPECT_EQ(std::memcmp(x->mapped(), values[i].data(), values[i].size()), 0);
  }
  // k1's space (between k0 and k2) is free again and reused.
  ExtentRef reuse = (*f)->Allocate("k1", values[1].size());
  ASSERT_NE(reuse, nullptr);
  EXPECT_EQ(reuse->offset, ids[1].offset);
  // Written after adoption: a higher sequence number than any adopted one.
  ASSERT_TRUE((*f)->Write(*reuse, values[1].data(), values[1].size()).ok());
  EXPECT_GT(reuse->seq, ids[2].seq);
  // Only while adopting.
  EXPECT_FALSE((*f)->Adopt("k3", ids[3]).ok());
  // pion-check's check of a reference: the header and the value's CRC.
  const std::string path = dir_ + "/" + kFileName;
  EXPECT_TRUE(TierFile::VerifyExtentAt(path, "k2", ids[2], true).ok());
  EXPECT_EQ(TierFile::VerifyExtentAt(path, "k2", ids[0], true).code(), Code::kCorruption);
  ASSERT_TRUE((*f)->CorruptForTest(**a2).ok());
  EXPECT_TRUE(TierFile::VerifyExtentAt(path, "k2", ids[2], false).ok());
  EXPECT_EQ(TierFile::VerifyExtentAt(path, "k2", ids[2], true).code(), Code::kCorruption);
}

TEST_F(TierFileTest, OpeningWithoutAdoptionEmptiesTheFile) {
  {
    auto f = TierFile::Open(dir_, 64 << 20);
    ASSERT_TRUE(f.ok());
    ExtentRef x = (*f)->Allocate("k", 9000);
    ASSERT_TRUE((*f)->Write(*x, Bytes(9000, 1).data(), 9000).ok());
    (*f)->KeepFreedExtents();
  }
  EXPECT_GT(std::filesystem::file_size(dir_ + "/" + kFileName), 0u);
  {
    auto f = TierFile::Open(dir_, 64 << 20, /*adopt=*/true);
    ASSERT_TRUE(f.ok());
    (*f)->FinishAdopt();  // nothing adopted
    EXPECT_EQ((*f)->used_bytes(), 0u);
  }
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + kFileName), 0u);
}

}  // namespace
}  // namespace pion::tier
