// The per-namespace rules (store/namespace.h) that a Store and the Redis
// module's value both use: an unshared namespace registers, stores, applies
// stored rows, describes itself and captures its view exactly as the same
// namespace inside a Store does, with the same errors.
#include "store/namespace.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "store/prefix_ops.h"
#include "store/store.h"

namespace pion::store {
namespace {

using quant::Format;

std::vector<float> Rows(uint64_t rows, uint32_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(rows * dim);
  for (float& f : v) f = nd(rng);
  return v;
}

RowInput F32In(const std::vector<float>& v) {
  return RowInput{RowInput::Type::kF32, v.data(), v.size() * 4};
}

std::string Bytes(const FetchPlan& p) {
  std::string out;
  for (const FetchSegment& s : p.segments)
    out += s.data ? std::string(reinterpret_cast<const char*>(s.data), s.rows * p.row_bytes)
                  : std::string(s.rows * p.row_bytes, '\0');
  return out;
}

RegisterArgs Args(std::string_view ns, uint32_t dim, Format fmt) {
  RegisterArgs a;
  a.ns = ns;
  a.kv_dim = dim;
  a.fmt = fmt;
  return a;
}

// Both answer a registration alike: OK, or the same reason and message.
void ExpectSameAnswer(const Status& store, const Status& unshared) {
  EXPECT_EQ(store.ok(), unshared.ok());
  EXPECT_EQ(store.ToString(), unshared.ToString());  // code, reason, its fields, message
  EXPECT_EQ(store.name(), unshared.name());
}

TEST(NamespaceTest, UnsharedRegistrationAnswersAsTheStore) {
  Store st(StoreConfig{});
  std::shared_ptr<Namespace> n;
  uint64_t lsn = 0;
  RegisterArgs a = Args("ns", 64, Format::kInt8);
  a.has_prefill = true;
  a.prefill_us = 5000;
  ExpectSameAnswer(OpRegister({st, &lsn}, a), RegisterUnshared(a, &n));
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(LookupOf(*n).prefill_us, OpLookup({st}, "ns").prefill_us);
  // (Out-of-range arguments are the grammar's to refuse: preconditions here.)
  for (const RegisterArgs& b : {Args("ns", 128, Format::kInt8), Args("ns", 64, Format::kFp16)}) {
    Status s = OpRegister({st, &lsn}, b), u = RegisterUnshared(b, &n);
    EXPECT_FALSE(u.ok());
    ExpectSameAnswer(s, u);
  }
  EXPECT_EQ(RegisterUnshared(Args("ns", 128, Format::kInt8), &n).reason<Reason>(),
            Reason::kRegisteredOther);
  // A re-registration without PREFILL_MS clears it; a table given replaces the old.
  auto t = std::make_shared<BlockTable>();
  t->block_size = 4;
  t->hashes = {1, 2};
  RegisterArgs c = Args("ns", 64, Format::kInt8);
  c.blocks = t;
  ExpectSameAnswer(OpRegister({st, &lsn}, c), RegisterUnshared(c, &n));
  EXPECT_EQ(LookupOf(*n).prefill_us, 0u);
  ASSERT_NE(NonEmptyBlocks(*n), nullptr);
  EXPECT_EQ((*NonEmptyBlocks(*n))->hashes, OpBlocks({st}, "ns")->hashes);
  // PARENT: an unshared namespace has none to link to.
  std::shared_ptr<Namespace> child;
  RegisterArgs d = Args("child", 64, Format::kInt8);
  d.parent = "absent";
  ExpectSameAnswer(OpRegister({st, &lsn}, d), RegisterUnshared(d, &child));
  EXPECT_EQ(child, nullptr);
}

TEST(NamespaceTest, UnsharedRowsMatchTheStore) {
  Store st(StoreConfig{});
  std::shared_ptr<Namespace> n;
  uint64_t lsn = 0;
  const RegisterArgs a = Args("ns", 64, Format::kTurbo4);
  ASSERT_TRUE(OpRegister({st, &lsn}, a).ok());
  ASSERT_TRUE(RegisterUnshared(a, &n).ok());
  const uint32_t R = n->rows_per_chunk;
  // Whole chunks, a partial one, a gap and an overwrite.
  struct Write {
    Side side;
    uint32_t layer;
    uint64_t start, count;
  };
  const Write writes[] = {{Side::kKeys, 0, 0, 2 * uint64_t{R} + 7},
                          {Side::kKeys, 0, 5, 3},
                          {Side::kValues, 3, 100, 9},
                          {Side::kKeys, 2, uint64_t{R} - 1, 2}};
  uint32_t seed = 1;
  for (const Write& w : writes) {
    std::vector<float> x = Rows(w.count, 64, seed++);
    ASSERT_TRUE(OpStoreRows({st, &lsn}, w.side == Side::kKeys ? "ns_pk" : "ns_pv", w.layer, w.start,
                            w.count, F32In(x))
                    .ok());
    ASSERT_TRUE(StoreRowsUnshared(*n, w.side, w.layer, w.start, w.count, F32In(x)).ok());
  }
  for (const Write& w : writes) {
    const uint64_t end = 3 * uint64_t{R};
    auto s = OpFetchRange({st}, w.side == Side::kKeys ? "ns_pk" : "ns_pv", w.layer, 0, end);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(Bytes(*s), Bytes(n->PlanRange(w.side, w.layer, 0, end)));
  }
  for (Side side : {Side::kKeys, Side::kValues}) {
    auto s = OpSessionInfo({st}, side == Side::kKeys ? "ns_pk" : "ns_pv");
    SessionInfo u = n->Describe(side);
    EXPECT_EQ(s->layer_tokens, u.layer_tokens);
    EXPECT_EQ(s->bytes, u.bytes);
    // The side's reservations are what a store's would be after its writes.
    const SideData& sd = n->side(side);
    base::MutexLock l(&sd.mu);
    EXPECT_EQ(sd.reserved_total, sd.total_rows);
    EXPECT_EQ(sd.applied_ticket, sd.next_ticket);
  }
  NamespaceInfo si, ui;
  ASSERT_TRUE(OpDescribe({st}, "ns", &si));
  DescribeChain(*n, &ui);
  EXPECT_EQ(si.tokens, ui.tokens);
  EXPECT_EQ(si.chain_tokens, ui.chain_tokens);
  EXPECT_EQ(si.chain_length, ui.chain_length);
  StoreStats ss = st.Stats();
  RowTally t = TallyRows(*n);
  EXPECT_EQ(ss.total_tokens, t.rows);
  EXPECT_EQ(ss.total_prefix_tokens, t.prefix_tokens);
  EXPECT_EQ(ss.bytes, t.rows * n->row_bytes);
  // The same error for rows the format refuses (out-of-range layers and
  // tokens are the grammar's to refuse: preconditions here).
  std::vector<float> one = Rows(1, 64, 9);
  one[3] = std::numeric_limits<float>::quiet_NaN();
  const Status s = OpStoreRows({st, &lsn}, "ns_pk", 0, 0, 1, F32In(one));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), StoreRowsUnshared(*n, Side::kKeys, 0, 0, 1, F32In(one)).ToString());
}

TEST(NamespaceTest, CapturedViewReappliesBitExact) {
  std::shared_ptr<Namespace> n, copy;
  const RegisterArgs a = Args("ns", 64, Format::kFp8);
  ASSERT_TRUE(RegisterUnshared(a, &n).ok());
  ASSERT_TRUE(RegisterUnshared(a, &copy).ok());
  std::vector<float> x = Rows(50, 64, 3);
  ASSERT_TRUE(StoreRowsUnshared(*n, Side::kValues, 1, 10, 50, F32In(x)).ok());
  persist::SnapshotNamespace v;
  CaptureNamespace(*n, nullptr, &v);
  ASSERT_EQ(v.layers[1].size(), 1u);
  EXPECT_TRUE(v.layers[0].empty());
  const auto& lv = v.layers[1][0];
  EXPECT_EQ(lv.layer, 1u);
  EXPECT_EQ(lv.rows, 60u);
  uint64_t pos = 0;
  for (const persist::SnapshotSegment& s : lv.segments) {
    if (s.data != nullptr) {
      ASSERT_TRUE(
          ApplyStoredUnshared(*copy, Side::kValues, 1, pos, s.rows, {s.data, s.rows * n->row_bytes})
              .ok());
    }
    pos += s.rows;
  }
  EXPECT_EQ(Bytes(n->PlanRange(Side::kValues, 1, 0, 60)),
            Bytes(copy->PlanRange(Side::kValues, 1, 0, 60)));
  // A record that does not fit the namespace is refused.
  EXPECT_FALSE(ApplyStoredUnshared(*copy, Side::kKeys, 0, 0, 2, {lv.segments[0].data, 3}).ok());
  // A write after the capture copies the frozen chunk: the view keeps its bytes.
  auto row59 = [&]() {
    uint64_t at = 0;
    for (const persist::SnapshotSegment& s : lv.segments) {
      if (59 < at + s.rows)
        return std::string(reinterpret_cast<const char*>(s.data) + (59 - at) * n->row_bytes,
                           n->row_bytes);
      at += s.rows;
    }
    return std::string();
  };
  const std::string before = row59();
  ASSERT_EQ(before.size(), n->row_bytes);
  std::vector<float> y = Rows(1, 64, 4);
  ASSERT_TRUE(StoreRowsUnshared(*n, Side::kValues, 1, 59, 1, F32In(y)).ok());
  EXPECT_EQ(row59(), before);
  EXPECT_NE(Bytes(n->PlanRange(Side::kValues, 1, 59, 60)), before);
}

}  // namespace
}  // namespace pion::store
