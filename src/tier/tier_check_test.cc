// The tier checker (pion-check's walk over a tier file): a file written by
// TierFile checks clean, holes are skipped, and each kind of damage (a value
// byte, a header byte, the magic, a stray block, a cut-off value) is reported
// at its extent's offset without hiding the extents around it.
#include "tier/tier_check.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tier/tier_file.h"

namespace pion::tier {
namespace {

class TierCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tier-check-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto f = TierFile::Open(dir_, 64 << 20);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    file_ = *f;
    // Four extents; the third is freed again (a hole between the second and the fourth).
    Put("alpha", 100000);
    Put(std::string(10000, 'k'), 5000);  // a three-block header
    Put("gone", 3 * kBlock);
    Put("omega", 0);
    xs_[2].reset();
  }
  void TearDown() override {
    xs_.clear();
    file_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Put(const std::string& key, size_t n) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    ExtentRef x = file_->Allocate(key, n);
    ASSERT_NE(x, nullptr);
    ASSERT_TRUE(file_->Write(*x, v.data(), n).ok());
    xs_.push_back(x);
  }

  // Overwrites bytes of the file (through the page cache, as damage would come).
  void Poke(uint64_t off, const std::string& bytes) {
    int fd = ::open(file_->path().c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(off)),
              static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  void Flip(uint64_t off) {
    uint8_t b = 0;
    int fd = ::open(file_->path().c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(off)), 1);
    ::close(fd);
    Poke(off, std::string(1, static_cast<char>(b ^ 0x5a)));
  }

  TierCheckReport Check() {
    TierCheckReport rep;
    Status s = CheckTierFile(file_->path(), &rep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return rep;
  }

  std::string dir_;
  std::shared_ptr<TierFile> file_;
  std::vector<ExtentRef> xs_;
};

TEST_F(TierCheckTest, AFileTheTierWroteIsClean) {
  TierCheckReport rep = Check();
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(rep.extents, 3u);
  EXPECT_EQ(rep.value_bytes, 100000u + 5000u + 0u);
  EXPECT_EQ(rep.extent_bytes, xs_[0]->length + xs_[1]->length + xs_[3]->length);
  EXPECT_TRUE(rep.stray.empty());
  EXPECT_EQ(rep.file_bytes, xs_[3]->offset + xs_[3]->length);
  // The freed extent is a hole (or zeros where the file system cannot tell).
  EXPECT_EQ(rep.hole_bytes + rep.zero_bytes, ExtentBytes(4, 3 * kBlock));
}

TEST_F(TierCheckTest, AFlippedValueByteDamagesThatExtentOnly) {
  Flip(xs_[1]->offset + xs_[1]->header_bytes + 4999);  // the value's last byte
  TierCheckReport rep = Check();
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, xs_[1]->offset);
  EXPECT_EQ(rep.damaged[0].key, std::string(10000, 'k'));
  EXPECT_NE(rep.damaged[0].reason.find("value checksum"), std::string::npos)
      << rep.damaged[0].reason;
  EXPECT_EQ(rep.extents, 2u);
  EXPECT_TRUE(rep.stray.empty());
  EXPECT_FALSE(rep.ok());
}

TEST_F(TierCheckTest, AFlippedHeaderByteIsReportedAndItsValueIsStray) {
  Flip(xs_[0]->offset + 17);  // in the value length field
  TierCheckReport rep = Check();
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, xs_[0]->offset);
  EXPECT_NE(rep.damaged[0].reason.find("header checksum"), std::string::npos)
      << rep.damaged[0].reason;
  // Its lengths are not trusted: the value's blocks are stray, the next extents found.
  ASSERT_EQ(rep.stray.size(), 1u);
  EXPECT_EQ(rep.stray[0].offset, xs_[0]->offset + kBlock);
  EXPECT_EQ(rep.stray[0].bytes, xs_[0]->length - kBlock);
  EXPECT_EQ(rep.extents, 2u);
}

TEST_F(TierCheckTest, ADamagedKeyInALongHeaderIsAHeaderError) {
  Flip(xs_[1]->offset + 64 + 9000);  // in the key, in the header's third block
  TierCheckReport rep = Check();
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, xs_[1]->offset);
  EXPECT_NE(rep.damaged[0].reason.find("header checksum"), std::string::npos);
}

TEST_F(TierCheckTest, ADamagedMagicIsStillFoundByItsChecksum) {
  Flip(xs_[3]->offset + 2);
  TierCheckReport rep = Check();
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, xs_[3]->offset);
  EXPECT_EQ(rep.damaged[0].key, "omega");
  EXPECT_NE(rep.damaged[0].reason.find("bad magic"), std::string::npos);
  EXPECT_TRUE(rep.stray.empty());
  EXPECT_EQ(rep.extents, 2u);
}

TEST_F(TierCheckTest, StrayBlocksAreReportedButAreNotDamage) {
  // Garbage in the freed extent's second block and after the last extent.
  const uint64_t hole = xs_[1]->offset + xs_[1]->length;
  Poke(hole + kBlock, std::string(kBlock, 'z'));
  const uint64_t end = xs_[3]->offset + xs_[3]->length;
  Poke(end, std::string(kBlock + 100, 'y'));
  TierCheckReport rep = Check();
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(rep.extents, 3u);
  ASSERT_EQ(rep.stray.size(), 2u);
  EXPECT_EQ(rep.stray[0].offset, hole + kBlock);
  EXPECT_EQ(rep.stray[0].bytes, kBlock);
  EXPECT_EQ(rep.stray[1].offset, end);
  EXPECT_EQ(rep.stray[1].bytes, kBlock + 100);  // the partial block at the end too
  EXPECT_EQ(rep.stray_bytes, 2 * kBlock + 100);
}

TEST_F(TierCheckTest, AValueCutOffByTheEndOfTheFileIsDamage) {
  ASSERT_EQ(::truncate(file_->path().c_str(), static_cast<off_t>(xs_[0]->offset + 2 * kBlock)), 0);
  TierCheckReport rep = Check();
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, xs_[0]->offset);
  EXPECT_NE(rep.damaged[0].reason.find("past the end"), std::string::npos);
  EXPECT_EQ(rep.extents, 0u);
}

TEST(TierCheckMemoryTest, EmptyAndGarbageInputs) {
  TierCheckReport rep;
  MemoryTierSource none(nullptr, 0);
  ASSERT_TRUE(CheckTier(none, &rep).ok());
  EXPECT_TRUE(rep.ok());
  EXPECT_EQ(rep.extents, 0u);
  std::vector<uint8_t> junk(3 * kBlock + 7, 0x41);
  std::memcpy(junk.data() + kBlock, kMagic, 8);  // a magic with nothing valid behind it
  MemoryTierSource src(junk.data(), junk.size());
  ASSERT_TRUE(CheckTier(src, &rep).ok());
  ASSERT_EQ(rep.damaged.size(), 1u);
  EXPECT_EQ(rep.damaged[0].offset, kBlock);
  EXPECT_EQ(rep.stray_bytes, 2 * kBlock + 7);
  EXPECT_EQ(rep.file_bytes, junk.size());
}

TEST(TierCheckMissingFileTest, IsAnError) {
  TierCheckReport rep;
  EXPECT_FALSE(CheckTierFile("/nonexistent/pion-tier.dat", &rep).ok());
}

}  // namespace
}  // namespace pion::tier
