#include "store/lease_table.h"

#include <gtest/gtest.h>

#include "store/strings.h"

namespace pion::store {
namespace {

PinLease LeaseOf(StrEntry* e) {
  PinLease l;
  l.keys.emplace_back(e, e->born);
  return l;
}

// Leases come due in deadline order, ids are never 0 or reused, and only the
// taker's user owns one.
TEST(LeaseTable, DueInDeadlineOrderAndOwnedByItsUser) {
  LeaseTable t;
  StrEntry e;
  e.born = t.NextBorn();
  const uint64_t late = t.Add(LeaseOf(&e), 300, "alice");
  const uint64_t early = t.Add(LeaseOf(&e), 100, "bob");
  EXPECT_NE(late, 0u);
  EXPECT_NE(early, late);
  EXPECT_TRUE(t.OwnedBy(late, "alice"));
  EXPECT_FALSE(t.OwnedBy(late, "bob"));
  EXPECT_EQ(t.FirstDue(99), 0u);
  EXPECT_EQ(t.FirstDue(100), early);
  std::optional<PinLease> l = t.Take(early);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->user, "bob");
  EXPECT_EQ(l->deadline_ms, 100);
  EXPECT_TRUE(t.current(*l));
  EXPECT_EQ(t.FirstDue(299), 0u);
  EXPECT_EQ(t.FirstDue(1000), late);
  EXPECT_FALSE(t.Take(early).has_value());
  EXPECT_EQ(t.Stats().leases, 1u);
}

// FLUSHALL (EndEpoch): a lease filed before pins nothing any more, the
// counts and the dead pins start again from zero.
TEST(LeaseTable, EndEpochLeavesEarlierLeasesPinningNothing) {
  LeaseTable t;
  StrEntry e;
  e.born = t.NextBorn();
  t.KeyPinned(100);
  t.RecordDead(e.born, 2);
  const uint64_t id = t.Add(LeaseOf(&e), 50, "u");
  t.EndEpoch();
  EXPECT_EQ(t.Stats().keys, 0u);
  EXPECT_EQ(t.Stats().bytes, 0u);
  EXPECT_FALSE(t.TakeDeadPin(e.born));
  std::optional<PinLease> l = t.Take(id);
  ASSERT_TRUE(l.has_value());
  EXPECT_FALSE(t.current(*l));
}

// The pins of an entry that left the map are consumed one at a time; the
// byte count follows charge changes and never goes below zero.
TEST(LeaseTable, DeadPinsAndCounts) {
  LeaseTable t;
  const uint64_t born = t.NextBorn();
  EXPECT_NE(t.NextBorn(), born);
  EXPECT_FALSE(t.TakeDeadPin(born));
  t.RecordDead(born, 2);
  EXPECT_TRUE(t.TakeDeadPin(born));
  EXPECT_TRUE(t.TakeDeadPin(born));
  EXPECT_FALSE(t.TakeDeadPin(born));
  t.KeyPinned(100);
  t.ChargeChanged(100, 40);
  EXPECT_EQ(t.Stats().bytes, 40u);
  t.KeyUnpinned(100);  // more than is counted: clamps at zero
  EXPECT_EQ(t.Stats().keys, 0u);
  EXPECT_EQ(t.Stats().bytes, 0u);
}

// max-block-leases: full once that many are live.
TEST(LeaseTable, FullAtTheLimit) {
  LeaseTable t;
  t.set_max_leases(1);
  StrEntry e;
  EXPECT_FALSE(t.full());
  const uint64_t id = t.Add(LeaseOf(&e), 10, "u");
  EXPECT_TRUE(t.full());
  (void)t.Take(id);
  EXPECT_FALSE(t.full());
}

}  // namespace
}  // namespace pion::store
