// The string operations' use of the byte budget (Slice::RoomLocked): a write
// that grows a key evicts or is refused; while used memory is over the budget
// (lowered under noeviction) SET and MSET are refused even when they would
// not grow it, as Redis refuses every write then, while an edit in place that
// does not grow the value still runs.
#include "store/string_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "store/key_ops.h"
#include "store/store.h"

namespace pion::store {
namespace {

std::string Value(Store& st, std::string_view key) {
  auto r = OpGet({st}, key);
  EXPECT_TRUE(r.ok());
  return r.ok() && *r != nullptr ? std::string((*r)->view()) : "<nil>";
}

Status Set(Store& st, std::string_view key, std::string_view v) {
  uint64_t lsn = 0;
  return OpSet({st, &lsn}, key, StrValue::Copy(v), SetOptions{}).status();
}

TEST(StringOps, OverTheBudgetWritesAreRefusedAndEditsThatDoNotGrowRun) {
  Store st({256, 0});
  const std::string a(1000, 'a');
  ASSERT_TRUE(Set(st, "a", a).ok());
  ASSERT_TRUE(Set(st, "b", std::string(1000, 'b')).ok());
  st.SetEvictPolicy(EvictPolicy::kNoEviction);
  uint64_t lsn = 0;
  ASSERT_TRUE(st.SetMaxBytes(1, &lsn).ok());  // noeviction: stays over, nothing goes
  ASSERT_GT(st.used_bytes(), st.max_bytes());

  // An overwrite of the same size would not grow used memory: still refused.
  EXPECT_EQ(Set(st, "a", std::string(1000, 'x')).code(), Code::kOutOfBudget);
  std::string_view kv[] = {"a", "y"};
  EXPECT_EQ(OpMSet({st, &lsn}, kv, false).status().code(), Code::kOutOfBudget);
  EXPECT_EQ(Value(st, "a"), a);
  // A copy to a new key grows it: refused.
  EXPECT_EQ(OpCopy({st, &lsn}, "a", "c", false).status().code(), Code::kOutOfBudget);
  EXPECT_EQ(OpType({st}, "c"), KeyType::kNone);

  // An edit in place within the value's capacity does not grow it: it runs.
  auto n = OpPatch({st, &lsn}, "a", [](std::string_view, bool exists, StrEdit* ed) {
    EXPECT_TRUE(exists);
    ed->offset = 0;
    ed->bytes = "z";
    return Status::OK();
  });
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(Value(st, "a"), "z" + a.substr(1));
  // An append that grows it is refused and changes nothing.
  EXPECT_EQ(OpAppend({st, &lsn}, "a", std::string(5000, 't')).status().code(), Code::kOutOfBudget);
  EXPECT_EQ(Value(st, "a").size(), 1000u);

  // Without a budget every one of them runs.
  ASSERT_TRUE(st.SetMaxBytes(0, &lsn).ok());
  EXPECT_TRUE(Set(st, "a", "x").ok());
  EXPECT_TRUE(*OpMSet({st, &lsn}, kv, false));
  EXPECT_TRUE(*OpCopy({st, &lsn}, "a", "c", false));
  EXPECT_EQ(Value(st, "c"), "y");
}

TEST(StringOps, AGrowingWriteEvictsAnotherKeyNeverItself) {
  // Two 1000-byte values fit (about 1.1 KB each); b grown to 1500 bytes is
  // copied into a buffer with room ahead (StrGrowCapacity: 3000 bytes), which
  // fits only without a.
  Store st({256, 4000});
  ASSERT_TRUE(Set(st, "a", std::string(1000, 'a')).ok());
  ASSERT_TRUE(Set(st, "b", std::string(1000, 'b')).ok());
  ASSERT_LT(OpKeyMemory({st}, "a") + StrGrowCapacity(1500) + kStrEntryOverhead, 4000u + 1000u);
  ASSERT_GT(OpKeyMemory({st}, "a") + StrGrowCapacity(1500) + kStrEntryOverhead, 4000u);
  uint64_t lsn = 0;
  // b grows past the budget: a (older) goes, b stays and grows.
  auto n = OpAppend({st, &lsn}, "b", std::string(500, 'c'));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1500u);
  EXPECT_EQ(Value(st, "a"), "<nil>");
  EXPECT_EQ(Value(st, "b"), std::string(1000, 'b') + std::string(500, 'c'));
  EXPECT_LE(st.used_bytes(), st.max_bytes());
}

TEST(StringOps, ReadsMayLeaveTheLsnOutEvenWhenTheyRemoveAnExpiredKey) {
  Store st({256, 0});
  uint64_t lsn = 0;
  SetOptions o;
  o.expire_at_ms = 1;  // long past: the next read removes it
  ASSERT_TRUE(OpSet({st, &lsn}, "gone", StrValue::Copy("v"), o).ok());
  ASSERT_TRUE(Set(st, "kept", "v").ok());
  std::string_view keys[] = {"gone", "kept", "gone"};
  EXPECT_EQ(OpExists({st}, keys), 1u);
  EXPECT_EQ(OpType({st}, "gone"), KeyType::kNone);
  EXPECT_EQ(OpExpireTimeMs({st}, "gone"), -2);
  auto got = OpMGet({st}, keys);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], nullptr);
  ASSERT_NE(got[1], nullptr);
  EXPECT_EQ(got[1]->view(), "v");
  EXPECT_EQ(st.DbSize(), 1u);
}

}  // namespace
}  // namespace pion::store
