#include "base/keyslot.h"

#include <gtest/gtest.h>

namespace pion {
namespace {

TEST(KeySlot, Crc16MatchesTheXmodemCheckValue) {
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(Crc16Xmodem(""), 0);
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
