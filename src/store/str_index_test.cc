#include "store/str_index.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "store/strings.h"

namespace pion::store {
namespace {

// Random inserts and erases against a std::multimap of (hash, entry): every
// entry is found under its hash, and nothing else is; equal hashes (forced by
// a small hash space in the second run) are all kept and told apart by the
// caller's comparison; the table grows and shrinks.
void RunAgainstReference(uint64_t hash_space, int steps) {
  StrIndex ix;
  std::multimap<uint64_t, StrEntry*> ref;
  std::vector<std::unique_ptr<StrEntry>> owned;
  std::mt19937_64 rng(hash_space);
  for (int step = 0; step < steps; ++step) {
    // Mostly inserts in the first half, mostly erases in the second.
    const bool insert = ref.empty() || (rng() % 100) < (step < steps / 2 ? 70u : 25u);
    if (insert) {
      owned.push_back(std::make_unique<StrEntry>());
      StrEntry* e = owned.back().get();
      e->hash = rng() % hash_space;
      ix.Insert(e->hash, e);
      ref.emplace(e->hash, e);
    } else {
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      ix.Erase(it->first, it->second);
      ref.erase(it);
    }
    ASSERT_EQ(ix.size(), ref.size());
    if (step % 97 == 0 || step == steps - 1) {
      for (const auto& [h, e] : ref) {
        StrEntry* want = e;
        EXPECT_EQ(ix.Find(h, [want](const StrEntry* x) { return x == want; }), want);
      }
      for (int k = 0; k < 50; ++k) {
        const uint64_t h = rng() % (hash_space * 2);
        if (ref.count(h) == 0) {
          EXPECT_EQ(ix.Find(h, [](const StrEntry*) { return true; }), nullptr);
        }
      }
      // At most half full, so every probe ends.
      EXPECT_LE(ix.size() * 2, ix.MemoryBytes() / sizeof(StrIndex::Slot));
    }
  }
}

TEST(StrIndex, MatchesAMultimapUnderInsertsAndErases) { RunAgainstReference(1ull << 62, 4000); }

TEST(StrIndex, KeepsEveryEntryOfACollidingHash) { RunAgainstReference(37, 3000); }

TEST(StrIndex, ShrinksAfterMassRemovalAndClears) {
  StrIndex ix;
  std::vector<StrEntry> es(5000);
  for (size_t i = 0; i < es.size(); ++i) ix.Insert(i * 0x9e3779b97f4a7c15ull, &es[i]);
  const uint64_t big = ix.MemoryBytes();
  for (size_t i = 0; i < es.size() - 10; ++i) ix.Erase(i * 0x9e3779b97f4a7c15ull, &es[i]);
  EXPECT_LT(ix.MemoryBytes(), big / 16);
  for (size_t i = es.size() - 10; i < es.size(); ++i)
    EXPECT_EQ(ix.Find(i * 0x9e3779b97f4a7c15ull, [](const StrEntry*) { return true; }), &es[i]);
  ix.Clear();
  EXPECT_EQ(ix.size(), 0u);
  EXPECT_EQ(ix.Find(0, [](const StrEntry*) { return true; }), nullptr);
}

// Hashes chosen to share their low bits (what a public hash of crafted keys
// gives an attacker) still spread: the slot comes from the secret mix.
TEST(StrIndex, CraftedHashesDoNotPileUp) {
  StrIndex ix;
  std::vector<StrEntry> es(20000);
  for (size_t i = 0; i < es.size(); ++i) ix.Insert(static_cast<uint64_t>(i) << 32, &es[i]);
  EXPECT_LT(ix.LongestRun(), 64u);
}

}  // namespace
}  // namespace pion::store
