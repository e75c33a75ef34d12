// Store lineage (KV.PREFIX.REGISTER ... PARENT): links, chain lookups, the
// tree-aware eviction order (leaves first, least recently used chain first,
// never an ancestor of the namespace being written), subtree drops, the
// logged records and their replay, and snapshot views (parents first).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/fp16.h"
#include "store/key_ops.h"
#include "store/prefix_ops.h"
#include "store/store.h"

namespace pion::store {
namespace {

using quant::Format;

constexpr uint32_t kDim = 64;  // fp16: 128 bytes per row

Status Reg(Store& st, std::string_view ns, std::string_view parent = {}, uint32_t dim = kDim) {
  RegisterArgs a;
  a.ns = ns;
  a.kv_dim = dim;
  a.fmt = Format::kFp16;
  a.parent = parent;
  uint64_t lsn;
  return OpRegister({st, &lsn}, a);
}

Status Put(Store& st, std::string_view ns, uint64_t rows, uint32_t seed = 1) {
  std::vector<uint16_t> v(rows * kDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = F32ToF16(static_cast<float>((i + seed) % 97) / 97);
  uint64_t lsn;
  return OpStoreRows({st, &lsn}, std::string(ns) + "_pk", 0, 0, rows,
                     RowInput{RowInput::Type::kF16, v.data(), v.size() * 2});
}

// Touches a namespace as a fetch does.
void Fetch(Store& st, std::string_view ns) {
  auto p = OpFetchRange({st}, std::string(ns) + "_pk", 0, 0, 1);
  ASSERT_TRUE(p.ok()) << ns;
}

bool Has(Store& st, std::string_view ns) {
  NamespaceInfo info;
  return OpDescribe({st}, ns, &info);
}

std::string Seg(char chain, int i) { return std::string(1, chain) + std::to_string(i); }

// Registers chain `c` of `n` segments: c0 <- c1 <- ... (c0 the root).
void Chain(Store& st, char c, int n) {
  for (int i = 0; i < n; ++i) ASSERT_TRUE(Reg(st, Seg(c, i), i ? Seg(c, i - 1) : "").ok());
}

// Records registrations (with their parent) and drops, in log order.
class LineageSink : public MutationSink {
 public:
  struct Rec {
    char op;  // R (register), D (drop), E (eviction), S (store)
    std::string ns;
    uint64_t inc = 0;
    std::string parent;
    uint64_t parent_inc = 0;
  };
  // Namespace records, recorded when written; string records are not logged.
  Result<uint64_t> Reserve(const persist::Record& r, PendingRecord* out) override {
    std::optional<Rec> rec = Describe(r);
    const bool logged = rec || std::holds_alternative<persist::FlushAllRec>(r);
    if (!logged) {
      if (out != nullptr) out->Unlogged();
      return uint64_t{0};
    }
    if (out == nullptr) return Add(std::move(rec));
    out->lsn = 0;
    out->write = [this, rec = std::move(rec)](std::span<const uint8_t>) mutable {
      return Add(std::move(rec));
    };
    return uint64_t{0};
  }
  static std::optional<Rec> Describe(const persist::Record& r) {
    return std::visit(
        persist::Overloaded{[](const persist::RegisterRec& x) -> std::optional<Rec> {
                              return Rec{'R', std::string(x.ns), x.incarnation,
                                         std::string(x.parent), x.parent_incarnation};
                            },
                            [](const persist::StoreRec& x) -> std::optional<Rec> {
                              return Rec{'S', std::string(x.ns), x.incarnation};
                            },
                            [](const persist::DropRec& x) -> std::optional<Rec> {
                              return Rec{x.reason == DropReason::kEviction ? 'E' : 'D',
                                         std::string(x.ns), x.incarnation};
                            },
                            [](const auto&) -> std::optional<Rec> { return std::nullopt; }},
        r);
  }
  uint64_t Add(std::optional<Rec> rec) {
    if (rec) recs.push_back(std::move(*rec));
    return ++lsn;
  }
  // The namespaces removed (op D or E), in order, from record `from` on.
  std::vector<std::string> Removed(char op, size_t from = 0) const {
    std::vector<std::string> out;
    for (size_t i = from; i < recs.size(); ++i)
      if (recs[i].op == op) out.push_back(recs[i].ns);
    return out;
  }
  std::vector<Rec> recs;
  uint64_t lsn = 0;
};

TEST(Lineage, RegisterLinksAndRefusals) {
  Store st({256, 0, 4});
  ASSERT_TRUE(Reg(st, "root").ok());
  Status s = Reg(st, "x", "nope");
  EXPECT_EQ(s.reason<Reason>(), Reason::kParentNotFound);
  EXPECT_FALSE(Has(st, "x"));
  s = Reg(st, "x", "root", 128);
  EXPECT_EQ(s.reason<Reason>(), Reason::kParentDim);
  EXPECT_EQ(s.field(0), 64);
  EXPECT_FALSE(Has(st, "x"));
  ASSERT_TRUE(Reg(st, "t1", "root").ok());
  ASSERT_TRUE(Reg(st, "t2", "t1").ok());
  ASSERT_TRUE(Reg(st, "t3", "t2").ok());
  s = Reg(st, "t4", "t3");  // a fifth namespace in the chain: over max_chain
  EXPECT_EQ(s.reason<Reason>(), Reason::kChainTooLong);
  EXPECT_EQ(s.field(0), 4);
  EXPECT_FALSE(Has(st, "t4"));
  // The link is fixed at creation: a re-registration keeps it or repeats it.
  EXPECT_TRUE(Reg(st, "t2").ok());
  EXPECT_TRUE(Reg(st, "t2", "t1").ok());
  s = Reg(st, "t2", "root");
  EXPECT_EQ(s.reason<Reason>(), Reason::kParentMismatch);
  EXPECT_EQ(s.name(), "t1");
  s = Reg(st, "root", "t3");  // would be a cycle: a root stays a root
  EXPECT_EQ(s.reason<Reason>(), Reason::kParentMismatch);
  EXPECT_EQ(s.name(), "");
  EXPECT_EQ(Reg(st, "t1", "t1").reason<Reason>(), Reason::kParentMismatch);
  EXPECT_EQ(Reg(st, "self", "self").reason<Reason>(), Reason::kParentNotFound);

  ASSERT_TRUE(Put(st, "root", 100).ok());
  ASSERT_TRUE(Put(st, "t1", 20).ok());
  ASSERT_TRUE(Put(st, "t3", 7).ok());
  NamespaceInfo info;
  ASSERT_TRUE(OpDescribe({st}, "t3", &info));
  EXPECT_EQ(info.parent, "t2");
  EXPECT_EQ(info.children, 0u);
  EXPECT_EQ(info.depth, 3u);
  EXPECT_EQ(info.chain_length, 4u);
  EXPECT_EQ(info.tokens, 7u);
  EXPECT_EQ(info.chain_tokens, 127u);
  ASSERT_TRUE(OpDescribe({st}, "root", &info));
  EXPECT_EQ(info.parent, "");
  EXPECT_EQ(info.children, 1u);
  EXPECT_EQ(info.chain_length, 1u);
  EXPECT_EQ(st.Stats().linked_prefixes, 3u);

  auto chain = OpLookupChain({st}, "t3");
  ASSERT_EQ(chain.size(), 4u);
  const char* names[] = {"root", "t1", "t2", "t3"};
  const uint64_t tokens[] = {100, 20, 0, 7};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(chain[i].ns, names[i]);
    EXPECT_EQ(chain[i].tokens, tokens[i]);
  }
  EXPECT_TRUE(OpLookupChain({st}, "nope").empty());
  EXPECT_EQ(OpLookupChain({st}, "root").size(), 1u);
}

// An access to a leaf refreshes its whole chain; eviction then takes the least
// recently used chain whole, leaf first, before any segment of another chain.
TEST(Lineage, EvictionTakesTheLeastRecentChainLeafFirst) {
  LineageSink sink;
  // Room for 9 namespaces: three chains of three. Every namespace in each
  // eviction's sample (exact LRU), so that the order is lineage's alone and
  // not also where the shards put the names.
  Store st({2 * 9, 0, 1024, 64});
  st.SetSink(&sink);
  Chain(st, 'a', 3);
  Chain(st, 'b', 3);
  Chain(st, 'c', 3);
  // Touch order: b's leaf (oldest), then c's root only, then a's leaf.
  Fetch(st, "b2");
  Fetch(st, "c0");
  Fetch(st, "a2");
  // c's leaves c2, c1 were last touched at creation, before b: they are the
  // oldest leaves; c0 then follows them up only once it is a leaf, and it was
  // touched after b2, so b goes before it.
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(Reg(st, "n" + std::to_string(i)).ok());
  EXPECT_EQ(sink.Removed('E'),
            (std::vector<std::string>{"c2", "c1", "b2", "b1", "b0", "c0", "a2", "a1", "a0"}));
}

TEST(Lineage, WholeChainAgesAsOneUnit) {
  LineageSink sink;
  Store st({2 * 15, 0, 1024, 64});  // exact LRU, as above
  st.SetSink(&sink);
  for (char c : {'a', 'b', 'c'}) Chain(st, c, 5);
  // Restoring a chain reads every segment (root first, as a client does).
  for (char c : {'c', 'a', 'b'})
    for (int i = 0; i < 5; ++i) Fetch(st, Seg(c, i));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Reg(st, "n" + std::to_string(i)).ok());
  EXPECT_EQ(sink.Removed('E'), (std::vector<std::string>{"c4", "c3", "c2", "c1", "c0"}));
  // Touching only a's root keeps the root's stamp fresh, but a's leaf (older
  // than b's) still goes first, and its chain with it up to the root.
  Fetch(st, "a0");
  ASSERT_TRUE(Reg(st, "m0").ok());
  EXPECT_EQ(sink.Removed('E').back(), "a4");
}

// Random chains, touches and a small byte budget: after every step, every
// namespace held has its parent held (no ancestor was evicted before a
// descendant), and a namespace being written never loses an ancestor.
TEST(Lineage, NoAncestorEvictedBeforeItsDescendants) {
  LineageSink sink;
  const uint64_t rows = 8;
  Store st({2 * 64, 30 * rows * 128});  // about 30 segments' rows
  st.SetSink(&sink);
  std::mt19937 rng(16);
  std::vector<std::vector<std::string>> chains(20);
  int made = 0;
  for (int step = 0; step < 2000; ++step) {
    auto& ch = chains[rng() % chains.size()];
    // Trim what was evicted off the end (a chain only loses its leaves).
    while (!ch.empty() && !Has(st, ch.back())) ch.pop_back();
    for (size_t i = 0; i < ch.size(); ++i) ASSERT_TRUE(Has(st, ch[i])) << ch[i];
    if (ch.empty() || (ch.size() < 5 && rng() % 2)) {
      std::string ns = "s" + std::to_string(made++);
      ASSERT_TRUE(Reg(st, ns, ch.empty() ? "" : ch.back()).ok());
      Status s = Put(st, ns, rows, static_cast<uint32_t>(step));
      ASSERT_TRUE(s.ok()) << s.message();
      // The write evicted others, never this chain.
      for (const auto& seg : ch) ASSERT_TRUE(Has(st, seg)) << seg;
      ch.push_back(ns);
    } else {
      Fetch(st, ch[rng() % ch.size()]);
    }
  }
  EXPECT_FALSE(sink.Removed('E').empty());
  // Replaying the log gives the same namespaces with the same links.
  Store replayed({2 * 64, 30 * rows * 128});
  for (const auto& r : sink.recs) {
    if (r.op == 'R') {
      ASSERT_TRUE(
          replayed.ApplyRegister(r.ns, r.inc, kDim, Format::kFp16, nullptr, r.parent, r.parent_inc)
              .ok());
    } else if (r.op == 'D' || r.op == 'E') {
      replayed.ApplyDrop(r.ns, r.inc);
    }
  }
  EXPECT_EQ(replayed.NamespaceCount(), st.NamespaceCount());
  EXPECT_EQ(replayed.Stats().linked_prefixes, st.Stats().linked_prefixes);
  for (const auto& ch : chains)
    for (const auto& seg : ch) {
      NamespaceInfo a, b;
      if (!OpDescribe({st}, seg, &a)) continue;
      ASSERT_TRUE(OpDescribe({replayed}, seg, &b)) << seg;
      EXPECT_EQ(a.parent, b.parent);
      EXPECT_EQ(a.chain_length, b.chain_length);
    }
}

// Storing into a leaf whose own chain fills the budget: the ancestors are never
// taken; the store is refused when nothing else can go.
TEST(Lineage, WritingALeafNeverEvictsItsAncestors) {
  const uint64_t rows = 10;
  Store st({256, 4 * rows * 128});
  Chain(st, 'a', 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put(st, Seg('a', i), rows).ok());
  ASSERT_TRUE(Reg(st, "z").ok());
  ASSERT_TRUE(Put(st, "z", rows).ok());
  // a2 grows: z (an unrelated leaf) goes, then nothing else may.
  std::vector<uint16_t> more(rows * kDim, 0);
  uint64_t lsn;
  ASSERT_TRUE(OpStoreRows({st, &lsn}, "a2_pk", 0, rows, rows,
                          {RowInput::Type::kF16, more.data(), more.size() * 2})
                  .ok());
  EXPECT_FALSE(Has(st, "z"));
  Status s = OpStoreRows({st, &lsn}, "a2_pk", 0, 2 * rows, rows,
                         {RowInput::Type::kF16, more.data(), more.size() * 2});
  EXPECT_EQ(s.code(), Code::kOutOfBudget);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Has(st, Seg('a', i)));
  // A new child never evicts its parent for session room either.
  Store small({2 * 2, 0});
  ASSERT_TRUE(Reg(small, "p").ok());
  ASSERT_TRUE(Reg(small, "q").ok());
  Fetch(small, "q");
  ASSERT_TRUE(Reg(small, "p1", "p").ok());  // evicts q, not the older p
  EXPECT_TRUE(Has(small, "p"));
  EXPECT_FALSE(Has(small, "q"));
  EXPECT_EQ(Reg(small, "p2", "p1").code(), Code::kOutOfBudget);  // only its own chain is left
}

TEST(Lineage, DropRemovesTheSubtreeLeavesFirst) {
  LineageSink sink;
  Store st({256, 0});
  st.SetSink(&sink);
  // r <- a <- a1, r <- b <- {b1, b2}; x alone.
  ASSERT_TRUE(Reg(st, "r").ok());
  ASSERT_TRUE(Reg(st, "a", "r").ok());
  ASSERT_TRUE(Reg(st, "a1", "a").ok());
  ASSERT_TRUE(Reg(st, "b", "r").ok());
  ASSERT_TRUE(Reg(st, "b1", "b").ok());
  ASSERT_TRUE(Reg(st, "b2", "b").ok());
  ASSERT_TRUE(Reg(st, "x").ok());
  ASSERT_TRUE(Put(st, "b2", 5).ok());
  const uint64_t bytes_x = st.Stats().bytes - 5 * 128;
  uint64_t lsn = 0;
  std::string_view one[] = {"b"};
  auto n = OpDrop({st, &lsn}, one);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_GT(lsn, 0u);
  EXPECT_EQ(sink.Removed('D'), (std::vector<std::string>{"b2", "b1", "b"}));
  EXPECT_EQ(st.Stats().bytes, bytes_x);
  NamespaceInfo info;
  ASSERT_TRUE(OpDescribe({st}, "r", &info));
  EXPECT_EQ(info.children, 1u);
  // A name given twice, or a descendant of a name given before, counts once.
  std::string_view many[] = {"r", "a1", "r", "nope"};
  n = OpDrop({st, &lsn}, many);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(st.NamespaceCount(), 1u);
  EXPECT_TRUE(Has(st, "x"));
  // The drop records replay to the same state, a cascade included.
  Store replayed({256, 0});
  for (const auto& r : sink.recs) {
    if (r.op == 'R') {
      ASSERT_TRUE(
          replayed.ApplyRegister(r.ns, r.inc, kDim, Format::kFp16, nullptr, r.parent, r.parent_inc)
              .ok());
    }
  }
  EXPECT_EQ(replayed.NamespaceCount(), 7u);
  replayed.ApplyDrop("r", sink.recs[0].inc);  // one record drops the whole subtree
  EXPECT_EQ(replayed.NamespaceCount(), 1u);
  EXPECT_TRUE(Has(replayed, "x"));
}

// A DROP's predicate sees every namespace it would remove, descendants
// included; one refusal refuses the whole call and nothing is removed or logged.
TEST(Lineage, DropPredicateRefusesTheWholeCall) {
  LineageSink sink;
  Store st({256, 0});
  st.SetSink(&sink);
  const std::pair<const char*, const char*> tree[] = {
      {"r", ""}, {"a", "r"}, {"a1", "a"}, {"x", ""}};
  for (auto [ns, parent] : tree) ASSERT_TRUE(Reg(st, ns, parent).ok()) << ns;
  const size_t recs = sink.recs.size();
  std::vector<std::string> asked;
  auto not_a1 = [&](std::string_view ns) {
    asked.emplace_back(ns);
    return ns != "a1";
  };
  uint64_t lsn = 0;
  std::string_view names[] = {"x", "r"};
  auto n = OpDrop({st, &lsn}, names, not_a1);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().reason<Reason>(), Reason::kDropRefused);
  EXPECT_EQ(lsn, 0u);
  EXPECT_EQ(sink.recs.size(), recs);
  EXPECT_EQ(st.NamespaceCount(), 4u);
  // Asked for the descendant it refuses (and stopped there, or later).
  EXPECT_NE(std::find(asked.begin(), asked.end(), "a1"), asked.end());
  EXPECT_LE(asked.size(), 4u);
  // Allowed everywhere: the same call drops all four.
  n = OpDrop({st, &lsn}, names, [](std::string_view) { return true; });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(st.NamespaceCount(), 0u);
}

// DEL/UNLINK of a parent (KeysDelete) asks the same predicate as DROP for
// every descendant: one refusal refuses the whole call, nothing removed or logged.
TEST(Lineage, KeysDeletePredicateCoversDescendants) {
  LineageSink sink;
  Store st({256, 0});
  st.SetSink(&sink);
  const std::pair<const char*, const char*> tree[] = {{"r", ""}, {"a", "r"}, {"a1", "a"}};
  for (auto [ns, parent] : tree) ASSERT_TRUE(Reg(st, ns, parent).ok()) << ns;
  const size_t recs = sink.recs.size();
  std::vector<std::string> asked;
  auto not_a1 = [&](std::string_view ns) {
    asked.emplace_back(ns);
    return ns != "a1";
  };
  uint64_t lsn = 0;
  for (std::string_view key : {"r", "r_pk", "a_pv"}) {
    std::string_view keys[] = {key};
    auto n = store::OpDelete({st, &lsn}, keys, not_a1);
    ASSERT_FALSE(n.ok()) << key;
    EXPECT_EQ(n.status().reason<Reason>(), Reason::kDropRefused);
    EXPECT_EQ(lsn, 0u);
    EXPECT_EQ(sink.recs.size(), recs);
    EXPECT_EQ(st.NamespaceCount(), 3u);
  }
  EXPECT_NE(std::find(asked.begin(), asked.end(), "a1"), asked.end());
  // Allowed: the subtree goes, each namespace counted as a key.
  std::string_view keys[] = {"r"};
  auto n = store::OpDelete({st, &lsn}, keys, [](std::string_view) { return true; });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(st.NamespaceCount(), 0u);
}

TEST(Lineage, ReplaySkipsAChildWhoseParentIsAbsent) {
  Store st({256, 0});
  // The parent's incarnation is not the logged one (or it is absent): skipped.
  ASSERT_TRUE(st.ApplyRegister("p", 1, kDim, Format::kFp16, nullptr).ok());
  ASSERT_TRUE(st.ApplyRegister("c", 2, kDim, Format::kFp16, nullptr, "p", 7).ok());
  EXPECT_FALSE(Has(st, "c"));
  ASSERT_TRUE(st.ApplyRegister("c", 2, kDim, Format::kFp16, nullptr, "q", 1).ok());
  EXPECT_FALSE(Has(st, "c"));
  ASSERT_TRUE(st.ApplyRegister("c", 2, kDim, Format::kFp16, nullptr, "p", 1).ok());
  NamespaceInfo info;
  ASSERT_TRUE(OpDescribe({st}, "c", &info));
  EXPECT_EQ(info.parent, "p");
  // A re-registration of the same incarnation keeps the link.
  ASSERT_TRUE(st.ApplyRegister("c", 2, kDim, Format::kFp16, nullptr).ok());
  ASSERT_TRUE(OpDescribe({st}, "c", &info));
  EXPECT_EQ(info.parent, "p");
  // A new incarnation of the parent replaces it with its subtree.
  ASSERT_TRUE(st.ApplyRegister("p", 3, kDim, Format::kFp16, nullptr).ok());
  EXPECT_FALSE(Has(st, "c"));
  EXPECT_EQ(st.ApplyRegister("c", 4, kDim, Format::kFp16, nullptr, "c", 4).code(),
            Code::kCorruption);
}

TEST(Lineage, SnapshotViewsListParentsFirstAndCarryTheLink) {
  Store st({256, 0});
  Chain(st, 'a', 3);
  Chain(st, 'b', 2);
  Fetch(st, "a2");  // a's chain is now the most recent
  Status bs;
  auto views = st.CaptureSnapshot(nullptr, &bs);
  ASSERT_TRUE(bs.ok());
  ASSERT_EQ(views.size(), 5u);
  std::map<std::string, size_t> pos;
  for (size_t i = 0; i < views.size(); ++i) pos[views[i].ns] = i;
  for (const auto& v : views) {
    if (v.parent.empty()) continue;
    ASSERT_TRUE(pos.count(v.parent));
    EXPECT_LT(pos[v.parent], pos[v.ns]) << v.ns;
  }
  EXPECT_EQ(views[pos["a1"]].parent, "a0");
  EXPECT_EQ(views[pos["a1"]].parent_incarnation, views[pos["a0"]].incarnation);
  // Stamps: a parent's is never below its child's.
  EXPECT_GE(views[pos["a0"]].lru_stamp, views[pos["a2"]].lru_stamp);
  EXPECT_GT(views[pos["a0"]].lru_stamp, views[pos["b0"]].lru_stamp);
  // Restoring the stamps restores the eviction order.
  Store loaded({2 * 5, 0});
  LineageSink sink;
  for (const auto& v : views)
    ASSERT_TRUE(loaded
                    .ApplyRegister(v.ns, v.incarnation, kDim, Format::kFp16, nullptr, v.parent,
                                   v.parent_incarnation)
                    .ok());
  for (const auto& v : views) loaded.SetLruStamp(v.ns, v.lru_stamp);
  loaded.SetSink(&sink);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Reg(loaded, "n" + std::to_string(i)).ok());
  EXPECT_EQ(sink.Removed('E'), (std::vector<std::string>{"b1", "b0", "a2", "a1", "a0"}));
}

// A child registration whose record is being written keeps its parent from
// eviction; a DROP of the parent meanwhile wins: the child is refused and
// absent, and replay (register, then the parent's drop) agrees.
class ParkingChildSink : public LineageSink {
 public:
  // A child registration: recorded when reserved, its write parked.
  Result<uint64_t> Reserve(const persist::Record& r, PendingRecord* out) override {
    const auto* reg = std::get_if<persist::RegisterRec>(&r);
    if (out == nullptr || reg == nullptr || reg->parent.empty())
      return LineageSink::Reserve(r, out);
    recs.push_back({'R', std::string(reg->ns), reg->incarnation, std::string(reg->parent),
                    reg->parent_incarnation});
    uint64_t l = ++lsn;
    out->lsn = l;
    out->write = [this, l](std::span<const uint8_t>) -> Result<uint64_t> {
      if (while_parked) while_parked();
      return l;
    };
    return l;
  }
  std::function<void()> while_parked;
};

TEST(Lineage, ParentDroppedWhileAChildRegisters) {
  ParkingChildSink sink;
  Store st({256, 20 * 128});
  st.SetSink(&sink);
  ASSERT_TRUE(Reg(st, "p").ok());
  ASSERT_TRUE(Put(st, "p", 10).ok());
  ASSERT_TRUE(Reg(st, "z").ok());
  std::future<void> other;
  bool finished = false;
  sink.while_parked = [&] {
    other = std::async(std::launch::async, [&] {
      // z's rows need p's bytes: p, with a child on the way, is not a
      // candidate, and nothing else is.
      EXPECT_EQ(Put(st, "z", 15).code(), Code::kOutOfBudget);
      EXPECT_TRUE(Has(st, "p"));
      uint64_t lsn;
      std::string_view names[] = {"p"};
      auto n = OpDrop({st, &lsn}, names);
      EXPECT_TRUE(n.ok());
      EXPECT_EQ(*n, 1u);
    });
    finished = other.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  };
  Status s = Reg(st, "c", "p");
  other.wait();
  EXPECT_TRUE(finished);
  EXPECT_EQ(s.reason<Reason>(), Reason::kParentNotFound);
  EXPECT_EQ(st.NamespaceCount(), 1u);  // z
  EXPECT_FALSE(Has(st, "c"));
  Store replayed({256, 0});
  for (const auto& r : sink.recs) {
    if (r.op == 'R') {
      ASSERT_TRUE(
          replayed.ApplyRegister(r.ns, r.inc, kDim, Format::kFp16, nullptr, r.parent, r.parent_inc)
              .ok());
    }
    if (r.op == 'D') replayed.ApplyDrop(r.ns, r.inc);
  }
  EXPECT_EQ(replayed.NamespaceCount(), 1u);
  EXPECT_FALSE(Has(replayed, "c"));
}

}  // namespace
}  // namespace pion::store
