// The pion-kvns RDB encoding (docs/module_format.md) against a fake of Redis's module
// I/O: a value survives save -> load bit for bit (rows, block table, PREFILL_MS, copy
// and digest agree), and the loader refuses every malformed field without leaking.
#include "module/ns_value.h"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "module/redis_api.h"
#include "store/namespace.h"

namespace pion::module {
namespace {

using store::Side;

// --- a fake of the module I/O calls: a stream of unsigned numbers and strings ---

struct Item {
  bool is_str = false;
  uint64_t u = 0;
  std::string s;
};
std::vector<Item> g_stream;
size_t g_pos = 0;
std::string g_digest;

void SaveU(RedisModuleIO*, uint64_t v) { g_stream.push_back({false, v, {}}); }
void SaveS(RedisModuleIO*, const char* p, size_t n) { g_stream.push_back({true, 0, {p, n}}); }
uint64_t LoadU(RedisModuleIO*) {
  // Redis aborts the load on a short or mistyped stream; the fake answers 0.
  if (g_pos >= g_stream.size() || g_stream[g_pos].is_str) return 0;
  return g_stream[g_pos++].u;
}
char* LoadS(RedisModuleIO*, size_t* len) {
  std::string s;
  if (g_pos < g_stream.size() && g_stream[g_pos].is_str) s = g_stream[g_pos++].s;
  *len = s.size();
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.data(), s.size());
  return p;
}
void LogIO(RedisModuleIO*, const char*, const char*, ...) {}
void DigestS(RedisModuleDigest*, const char* p, size_t n) { g_digest.append(p, n) += '|'; }
void DigestLL(RedisModuleDigest*, long long v) { g_digest += std::to_string(v) + '|'; }
void DigestEnd(RedisModuleDigest*) { g_digest += ';'; }

class NsValueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis::api.Alloc = std::malloc;
    redis::api.Free = std::free;
    redis::api.SaveUnsigned = SaveU;
    redis::api.SaveStringBuffer = SaveS;
    redis::api.LoadUnsigned = LoadU;
    redis::api.LoadStringBuffer = LoadS;
    redis::api.LogIOError = LogIO;
    redis::api.DigestAddStringBuffer = DigestS;
    redis::api.DigestAddLongLong = DigestLL;
    redis::api.DigestEndSequence = DigestEnd;
    g_stream.clear();
    g_pos = 0;
    baseline_ = Totals().namespaces.load();
  }
  void TearDown() override { EXPECT_EQ(Totals().namespaces.load(), baseline_); }

  // An int8 namespace, kv_dim 64: a 3-hash block table, PREFILL_MS 12, K layer 0
  // rows 0..9 and V layer 3 rows 100..104.
  static NsValue* Sample() {
    auto t = std::make_shared<store::BlockTable>();
    t->block_size = 16;
    t->hashes = {5, 9, 11};
    t->Finish();
    store::RegisterArgs ra;
    ra.ns = kInternalNs;
    ra.kv_dim = 64;
    ra.fmt = quant::Format::kInt8;
    ra.blocks = t;
    ra.has_prefill = true;
    ra.prefill_us = 12000;
    std::shared_ptr<store::Namespace> ns;
    EXPECT_TRUE(store::RegisterUnshared(ra, &ns).ok());
    std::vector<float> rows(15 * 64);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>((i * 37) % 101) / 7.0f;
    store::RowInput in{store::RowInput::Type::kF32, rows.data(), 10 * 64 * 4};
    EXPECT_TRUE(store::StoreRowsUnshared(*ns, Side::kKeys, 0, 0, 10, in).ok());
    store::RowInput in2{store::RowInput::Type::kF32, rows.data() + 10 * 64, 5 * 64 * 4};
    EXPECT_TRUE(store::StoreRowsUnshared(*ns, Side::kValues, 3, 100, 5, in2).ok());
    return NewNsValue(std::move(ns));
  }

  static std::string Rows(NsValue* v, Side side, uint32_t layer, uint64_t end) {
    store::FetchPlan plan = v->ns->PlanRange(side, layer, 0, end);
    std::string out;
    for (const store::FetchSegment& s : plan.segments)
      out += s.data ? std::string(reinterpret_cast<const char*>(s.data), s.rows * plan.row_bytes)
                    : std::string(s.rows * plan.row_bytes, '\0');
    return out;
  }

  static std::string DigestOf(NsValue* v) {
    g_digest.clear();
    Digest(nullptr, v);
    return g_digest;
  }

  uint64_t baseline_ = 0;
};

TEST_F(NsValueTest, SaveLoadRoundTripIsBitExact) {
  NsValue* a = Sample();
  RdbSave(nullptr, a);
  auto* b = static_cast<NsValue*>(RdbLoad(nullptr, kEncodingVersion));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(g_pos, g_stream.size());  // read exactly what was written
  EXPECT_EQ(Rows(a, Side::kKeys, 0, 10), Rows(b, Side::kKeys, 0, 10));
  EXPECT_EQ(Rows(a, Side::kValues, 3, 105), Rows(b, Side::kValues, 3, 105));
  EXPECT_EQ(store::LookupOf(*b->ns).prefill_us, 12000u);
  ASSERT_NE(store::NonEmptyBlocks(*b->ns), nullptr);
  EXPECT_EQ((*store::NonEmptyBlocks(*b->ns))->hashes, (std::vector<uint64_t>{5, 9, 11}));
  EXPECT_EQ(b->ns->Describe(Side::kValues).layer_tokens,
            a->ns->Describe(Side::kValues).layer_tokens);
  EXPECT_EQ(DigestOf(a), DigestOf(b));
  auto* c = static_cast<NsValue*>(Copy(nullptr, nullptr, a));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(DigestOf(a), DigestOf(c));
  EXPECT_GT(MemUsage(a), 10u * 68);
  FreeValue(a);
  FreeValue(b);
  FreeValue(c);
}

TEST_F(NsValueTest, DigestSeesEveryChange) {
  NsValue* a = Sample();
  std::string before = DigestOf(a);
  std::vector<float> row(64, 1.0f);
  store::RowInput in{store::RowInput::Type::kF32, row.data(), 64 * 4};
  ASSERT_TRUE(store::StoreRowsUnshared(*a->ns, Side::kKeys, 0, 4, 1, in).ok());
  EXPECT_NE(DigestOf(a), before);
  FreeValue(a);
}

TEST_F(NsValueTest, LoaderRefusesEveryMalformedField) {
  NsValue* a = Sample();
  RdbSave(nullptr, a);
  FreeValue(a);
  const std::vector<Item> good = g_stream;
  // Layout (docs/module_format.md): 0 dim, 1 format, 2 prefill, 3 has_blocks,
  // 4 block_size, 5 hashes, 6 K layers, 7 layer, 8 rows, 9 pieces, 10 start,
  // 11 stored, 12 V layers, 13 layer, 14 rows, 15 pieces, 16 start, 17 stored.
  ASSERT_EQ(good.size(), 18u);
  ASSERT_EQ(good[8].u, 10u);
  ASSERT_EQ(good[14].u, 105u);
  struct Case {
    const char* what;
    size_t index;
    Item item;
  };
  const Case cases[] = {
      {"kv_dim 0", 0, {false, 0, {}}},
      {"kv_dim too big", 0, {false, 16385, {}}},
      {"format out of range", 1, {false, 7, {}}},
      {"another format: the pieces are not whole rows of it", 1, {false, 4, {}}},
      {"block flag 2", 3, {false, 2, {}}},
      {"block size 0", 4, {false, 0, {}}},
      {"hash list not 8-byte words", 5, {true, 0, "1234567"}},
      {"257 layers", 6, {false, 257, {}}},
      {"layer 256", 7, {false, 256, {}}},
      {"zero rows", 8, {false, 0, {}}},
      {"rows beyond 16M", 8, {false, 16777217, {}}},
      {"rows the pieces do not reach", 8, {false, 11, {}}},
      {"no pieces", 9, {false, 0, {}}},
      {"piece beyond the rows", 10, {false, 5, {}}},
      {"piece not whole rows", 11, {true, 0, std::string(67, 'x')}},
      {"empty piece", 11, {true, 0, {}}},
      {"V piece beyond its rows", 16, {false, 101, {}}},
  };
  for (const Case& c : cases) {
    g_stream = good;
    g_stream[c.index] = c.item;
    g_pos = 0;
    void* v = RdbLoad(nullptr, kEncodingVersion);
    EXPECT_EQ(v, nullptr) << c.what;
    if (v != nullptr) FreeValue(v);
  }
  // Layers out of order: two V layers, the second not above the first.
  g_stream = good;
  g_stream[12].u = 2;
  std::vector<Item> again(good.begin() + 13, good.end());
  g_stream.insert(g_stream.end(), again.begin(), again.end());
  g_pos = 0;
  EXPECT_EQ(RdbLoad(nullptr, kEncodingVersion), nullptr);
  // An unknown encoding version.
  g_stream = good;
  g_pos = 0;
  EXPECT_EQ(RdbLoad(nullptr, kEncodingVersion + 1), nullptr);
  // dim 48 is fine for int8 but not for turbo4.
  g_stream = good;
  g_stream[0].u = 48;
  g_stream[1].u = static_cast<uint64_t>(quant::Format::kTurbo4);
  g_pos = 0;
  EXPECT_EQ(RdbLoad(nullptr, kEncodingVersion), nullptr);
}

}  // namespace
}  // namespace pion::module
