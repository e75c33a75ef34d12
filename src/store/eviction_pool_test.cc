#include "store/eviction_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "store/namespace.h"

namespace pion::store {
namespace {

// The pool reads nothing of a namespace but its identity (stamp and depth are
// given with each offer).
std::shared_ptr<Namespace> Ns() {
  return std::make_shared<Namespace>("n", 1, 64, quant::Format::kFp16);
}

// The pool keeps the kEvictionPoolSize oldest offered; a full pool takes an
// older candidate in place of its youngest and refuses a younger one.
TEST(EvictionPool, KeepsTheOldestOffered) {
  EvictionPool pool;
  std::vector<std::shared_ptr<Namespace>> all;
  for (uint64_t i = 0; i < kEvictionPoolSize; ++i) {
    all.push_back(Ns());
    pool.Offer(all.back(), 100 + i, 0);
  }
  EXPECT_EQ(pool.size(), kEvictionPoolSize);
  auto young = Ns();
  pool.Offer(young, 1000, 0);  // younger than every entry: refused
  auto old = Ns();
  pool.Offer(old, 5, 0);  // older: replaces the youngest (stamp 115)
  EXPECT_EQ(pool.size(), kEvictionPoolSize);
  EXPECT_EQ(pool.Oldest(), old);
  pool.Remove(old.get());
  EXPECT_EQ(pool.Oldest(), all[0]);
  // The replaced youngest is gone: removing every other entry leaves none.
  for (size_t i = 0; i + 1 < kEvictionPoolSize; ++i) pool.Remove(all[i].get());
  EXPECT_TRUE(pool.empty());
}

// A pooled namespace offered again is refreshed, not added twice; on a tie of
// stamps the deeper one is older (a chain goes leaf to root).
TEST(EvictionPool, RefreshesInPlaceAndBreaksTiesByDepth) {
  EvictionPool pool;
  auto root = Ns(), leaf = Ns();
  pool.Offer(root, 50, 0);
  pool.Offer(leaf, 50, 2);
  EXPECT_EQ(pool.Oldest(), leaf);
  pool.Offer(leaf, 60, 2);
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool.Oldest(), root);
}

// Refresh re-reads every entry: a freed namespace and one the callback
// rejects go, the rest take their current stamps.
TEST(EvictionPool, RefreshDropsTheGoneAndRereadsStamps) {
  EvictionPool pool;
  auto a = Ns(), b = Ns(), c = Ns();
  pool.Offer(a, 10, 0);
  pool.Offer(b, 20, 0);
  pool.Offer(c, 30, 0);
  a.reset();  // freed: the pool held it weakly
  pool.Refresh([&](const std::shared_ptr<Namespace>& n) -> std::optional<uint64_t> {
    if (n == b) return std::nullopt;  // no longer a candidate
    return 40;                        // touched since it was pooled
  });
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.Oldest(), c);
}

}  // namespace
}  // namespace pion::store
