// The V.* family in process: V.STOREBATCH, V.FETCH (ids, RANGE, BATCH, FMT),
// V.INFO, and their refusals.
#include <cstring>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

std::string F32(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}
// `n` rows of `d` values that fp16 holds exactly.
std::vector<float> Rows(int n, int d, float base) {
  std::vector<float> v;
  for (int i = 0; i < n * d; ++i) v.push_back(base + static_cast<float>(i % 64) * 0.25f);
  return v;
}

class VStoreCommands : public KvTest {
 protected:
  void SetUp() override { ASSERT_EQ(Run({"KV.PREFIX.REGISTER", "s", "32", "fp16"}), "OK"); }
};

TEST_F(VStoreCommands, StoreThenFetchRangeAndIds) {
  std::vector<float> rows = Rows(4, 32, 1.0f);
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "0", "2", "4", F32(rows)}), "OK");
  EXPECT_EQ(last_wait_lsn(), 0u);  // no log: nothing to wait for
  RespValue r = Run({"V.FETCH", "s_pk", "0", "RANGE", "2", "6"});
  ASSERT_EQ(r.type, RespValue::Type::kBulk);
  EXPECT_EQ(Floats(r.str), rows);
  // Rows before the stored ones read as zeros; ids come back in request order.
  r = Run({"V.FETCH", "s_pk", "0", "RANGE", "0", "3"});
  std::vector<float> got = Floats(r.str);
  ASSERT_EQ(got.size(), 3u * 32);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[64], rows[0]);
  r = Run({"V.FETCH", "s_pk", "0", "5", "2"});
  got = Floats(r.str);
  ASSERT_EQ(got.size(), 2u * 32);
  EXPECT_EQ(got[0], rows[3 * 32]);
  EXPECT_EQ(got[32], rows[0]);
  // Nothing stored in range, or another layer: null.
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "RANGE", "100", "110"}).type, RespValue::Type::kNull);
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "7", "RANGE", "0", "5"}).type, RespValue::Type::kNull);
  // fp16 holds these exactly: NATIVE is their f16 bits, F16 the same.
  RespValue native = Run({"V.FETCH", "s_pk", "0", "RANGE", "2", "6", "FMT", "NATIVE"});
  EXPECT_EQ(native.str.size(), 4u * 32 * 2);
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "RANGE", "2", "6", "FMT", "F16"}).str, native.str);
}

TEST_F(VStoreCommands, BatchForm) {
  std::vector<float> rows = Rows(2, 32, 2.0f);
  Run({"V.STOREBATCH", "s_pv", "0", "0", "2", F32(rows)});
  Run({"V.STOREBATCH", "s_pv", "2", "0", "2", F32(rows)});
  RespValue r = Run({"V.FETCH", "s_pv", "BATCH", "0", "2"});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(Floats(r[0].str), rows);
  EXPECT_EQ(r[1].type, RespValue::Type::kNull);
  EXPECT_EQ(Floats(r[2].str), rows);
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "BATCH", "0", "2"}).error(),
            "ERR V.FETCH BATCH: session has no stored layers");
  EXPECT_EQ(Run({"V.FETCH", "s_pv", "BATCH", "2", "2"}).error(),
            "ERR V.FETCH BATCH invalid range: end must exceed start (>=0)");
}

TEST_F(VStoreCommands, RefusalsChangeNothing) {
  std::string one = F32(Rows(1, 32, 0.5f));
  EXPECT_EQ(Run({"V.STOREBATCH", "nope_pk", "0", "0", "1", one}).error(), "NOSESSION session not found");
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "256", "0", "1", one}).error(),
            "ERR layer out of range (0..255)");
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "0", "-1", "1", one}).error(),
            "ERR invalid start (0..16777216)");
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "0", "0", "0", one}).error(),
            "ERR invalid count (1..16777216)");
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "0", "0", "2", one}).error(),
            "ERR V.STOREBATCH: blob size 128 != expected 256 (count=2 x kv_dim=32 x 4)");
  EXPECT_EQ(Run({"V.STOREBATCH", "s_pk", "0", "0", "1", one, "FMT", "BF16"}).error(),
            "ERR V.STOREBATCH: unknown option (expected FMT F32|F16)");
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "RANGE", "0", "1"}).type, RespValue::Type::kNull);
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "RANGE", "5", "5"}).error(),
            "ERR invalid RANGE: end must exceed start (>=0)");
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "1", "FMT", "NATIVE"}).error(),
            "ERR FMT NATIVE requires the RANGE or BATCH form");
  EXPECT_EQ(Run({"V.FETCH", "s_pk", "0", "RANGE", "0", "1", "FMT", "X"}).error(),
            "ERR V.FETCH: unknown FMT 'X' (want NATIVE|F32|F16)");
  EXPECT_EQ(Run({"V.INFO", "zz_pv"}).error(), "NOSESSION session not found");
}

TEST_F(VStoreCommands, InfoDescribesTheSession) {
  Run({"V.STOREBATCH", "s_pk", "1", "0", "3", F32(Rows(3, 32, 1.0f))});
  RespValue r = Run({"V.INFO", "s_pk"});
  ASSERT_EQ(r.type, RespValue::Type::kBulk);
  for (const char* want : {"value_dim:32", "v_format:fp16", "num_layers:2", "layer_1_tokens:3"})
    EXPECT_NE(r.str.find(want), std::string::npos) << want << " in " << r.str;
}

}  // namespace
}  // namespace pion::server::testing
