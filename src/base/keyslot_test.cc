#include "base/keyslot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/cpu.h"

namespace pion {
namespace {

TEST(KeySlot, Crc16MatchesTheXmodemCheckValue) {
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(Crc16Xmodem(""), 0);
}

TEST(KeySlot, TableCrcMatchesTheScalarReference) {
  std::string bytes;
  uint32_t x = 12345;
  for (int len = 0; len < 300; ++len) {
    EXPECT_EQ(Crc16Xmodem(bytes), Crc16XmodemScalar(bytes)) << len;
    x = x * 1103515245u + 12345u;
    bytes.push_back(static_cast<char>(x >> 16));
  }
  EXPECT_EQ(Crc16XmodemScalar("123456789"), 0x31C3);
}

TEST(KeySlot, InlineSlotMatchesKeySlot) {
  for (std::string_view k : {"", "a", "app_pk", "{app|v1}_pk", "x{}y", "{", "}{a}", "a{b}c{d}",
                             "{user1000}.following", "foo{bar", "123456789"})
    EXPECT_EQ(KeySlotInline(k), KeySlot(k)) << k;
  std::string k;
  for (int i = 0; i < 200; ++i) {
    k.push_back(static_cast<char>('a' + (i * 7) % 26));
    EXPECT_EQ(KeySlotInline(k), KeySlot(k)) << k;
  }
}

TEST(KeySlot, BatchedSlotsMatchKeySlot) {
  // Runs of one length (the interleaved path), mixed lengths, hash tags, the
  // empty key and a tail of fewer than four keys, against the one-key rule.
  std::vector<std::string> owned;
  uint32_t x = 777;
  for (int i = 0; i < 203; ++i) {
    size_t len = i < 80 ? 64 : (i < 120 ? static_cast<size_t>(i % 7) : 1 + (i % 37));
    std::string k;
    for (size_t b = 0; b < len; ++b) {
      x = x * 1103515245u + 12345u;
      k.push_back(static_cast<char>(x >> 16));
    }
    if (i % 29 == 5) k = "{tag}" + k.substr(std::min<size_t>(k.size(), 5));
    owned.push_back(std::move(k));
  }
  std::vector<std::string_view> keys(owned.begin(), owned.end());
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{80}, keys.size()}) {
    std::vector<uint16_t> out(n, 0xffff);
    KeySlots(std::span<const std::string_view>(keys.data(), n), out.data());
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], KeySlot(keys[i])) << n << " " << i;
  }
}

TEST(KeySlot, ClmulCrcMatchesTheScalarReference) {
  // Every length over several 16-byte blocks and tails, with and without a
  // '{' at each place (the brace flag), against the bit-at-a-time reference.
  if (!internal::Crc16ClmulAvailable()) GTEST_SKIP() << "no PCLMULQDQ";
  std::string bytes;
  uint32_t x = 4242;
  for (int len = 0; len < 300; ++len) {
    bool brace = true;
    EXPECT_EQ(internal::Crc16ClmulForTest(bytes, &brace), Crc16XmodemScalar(bytes)) << len;
    EXPECT_EQ(brace, bytes.find('{') != std::string::npos) << len;
    x = x * 1103515245u + 12345u;
    char c = static_cast<char>(x >> 16);
    bytes.push_back(c == '{' ? 'a' : c);
  }
  for (size_t at = 0; at < 80; ++at) {
    std::string k(80, '\xff');
    k[at] = '{';
    bool brace = false;
    EXPECT_EQ(internal::Crc16ClmulForTest(k, &brace), Crc16XmodemScalar(k)) << at;
    EXPECT_TRUE(brace) << at;
  }
}

TEST(KeySlot, BatchedTableSlotsMatchKeySlot) {
  std::vector<std::string> owned;
  for (int i = 0; i < 41; ++i)
    owned.push_back(std::string(64, static_cast<char>('0' + i % 10)) +
                    std::to_string(i % 3 == 0 ? i : 0));
  owned[7] = "{x}" + owned[7];
  std::vector<std::string_view> keys(owned.begin(), owned.end());
  std::vector<uint16_t> out(keys.size());
  internal::KeySlotsTable(keys, out.data());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(out[i], KeySlot(keys[i])) << i;
}

// KeySlots takes the CLMUL CRC or the table's by CpuHas(kPclmul): with the
// feature off (PION_CPU_DISABLE=pclmul) the same keys give the same slots.
TEST(KeySlot, KeySlotsAgreeWithAndWithoutPclmul) {
  std::vector<std::string> owned;
  for (int i = 0; i < 300; ++i)
    owned.push_back(std::string(static_cast<size_t>(i % 97), static_cast<char>('a' + i % 26)) +
                    (i % 5 == 0 ? "{t" + std::to_string(i) + "}" : std::to_string(i)));
  std::vector<std::string_view> keys(owned.begin(), owned.end());
  std::vector<uint16_t> fast(keys.size()), table(keys.size());
  KeySlots(keys, fast.data());
  TEST_SetCpuFeaturesOff(1u << static_cast<unsigned>(CpuFeature::kPclmul));
  EXPECT_FALSE(CpuHas(CpuFeature::kPclmul));
  KeySlots(keys, table.data());
  TEST_SetCpuFeaturesOff(0);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(fast[i], table[i]) << i;
    EXPECT_EQ(fast[i], KeySlot(keys[i])) << i;
  }
}

TEST(KeySlot, KnownSlots) {
  EXPECT_EQ(KeySlot("foo"), 12182u);
  EXPECT_LT(KeySlot("anything"), kClusterSlots);
}

TEST(KeySlot, HashTagRule) {
  EXPECT_EQ(HashedPart("{app|v1|m|fp16|p}"), "app|v1|m|fp16|p");
  EXPECT_EQ(HashedPart("{app|v1|m|fp16|p}_pk"), "app|v1|m|fp16|p");
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{ns}"), KeySlot("{ns}_pv"));
  // Empty or unclosed tags hash the whole key; only the first tag counts.
  EXPECT_EQ(HashedPart("{}x"), "{}x");
  EXPECT_EQ(HashedPart("ab{c"), "ab{c");
  EXPECT_EQ(HashedPart("a{b}{c}"), "b");
  EXPECT_EQ(HashedPart("a{{b}}"), "{b");
}

}  // namespace
}  // namespace pion
