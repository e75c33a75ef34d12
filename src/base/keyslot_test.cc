#include "base/keyslot.h"

#include <gtest/gtest.h>

#include <string>

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

TEST(KeySlot, MayHaveHashTagMatchesFind) {
  // Every length up to several 16-byte steps and a tail, with a '{' at each
  // place and with none, against string_view::find (the reference).
  std::string bytes;
  uint32_t x = 4242;
  for (int len = 0; len < 100; ++len) {
    EXPECT_FALSE(MayHaveHashTag(bytes)) << len;
    for (int at = 0; at < len; ++at) {
      std::string k = bytes;
      k[at] = '{';
      EXPECT_TRUE(MayHaveHashTag(k)) << len << " " << at;
    }
    x = x * 1103515245u + 12345u;
    const char c = static_cast<char>(x >> 16);
    bytes.push_back(c == '{' ? 'a' : c);
  }
  // A key inside a larger buffer: the bytes after it are not the key's.
  const std::string buf = std::string(40, 'k') + "{";
  EXPECT_FALSE(MayHaveHashTag(std::string_view(buf).substr(0, 40)));
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
