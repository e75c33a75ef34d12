// KV.BLOCK.CHAIN ... FORMAT f DTYPE d ROW n in process (docs/protocol.md "Block
// formats"): the stored value is quantized and charged so, the read commands
// answer it dequantized (fp16 of f16 input bit for bit), the edits refuse it,
// SET over it stores plain bytes, and every error's text with nothing stored.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kvproto/errors.h"
#include "quant/bf16.h"
#include "quant/format.h"
#include "server/commands/testing/command_fixture.h"
#include "store/block_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server::testing {
namespace {

std::string F32Bytes(const std::vector<float>& x) {
  return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
}

std::vector<float> Ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  return x;
}

class BlockFormat : public KvTest {
 protected:
  store::StrRef Stored(std::string_view key) {
    auto r = store::OpGet({*server().store()}, key);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : nullptr;
  }
};

TEST_F(BlockFormat, StoredQuantizedAndReadBackDequantized) {
  const std::vector<float> x = Ramp(4 * 64);
  const std::string raw = F32Bytes(x);
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "FORMAT", "turbo4", "DTYPE", "f32", "ROW", "64", "k", raw}),
            "OK");
  store::StrRef v = Stored("k");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->quantized());
  EXPECT_EQ(v->size, 4 * quant::RowBytes(quant::Format::kTurbo4, 64));  // 4 x 40 bytes
  EXPECT_TRUE(Run({"STRLEN", "k"}).is_integer(static_cast<int64_t>(raw.size())));
  RespValue got = Run({"GET", "k"});
  ASSERT_EQ(got.str.size(), raw.size());
  std::vector<float> want(x.size());
  quant::DecodeRows(quant::Format::kTurbo4, v->data, 4, 64, want.data());
  EXPECT_EQ(got.str, F32Bytes(want));
  EXPECT_EQ(Run({"MGET", "k"}).elems.at(0).str, got.str);
  EXPECT_EQ(Run({"GETEX", "k", "PERSIST"}).str, got.str);
  EXPECT_EQ(Run({"GETDEL", "k"}).str, got.str);
  EXPECT_TRUE(Run({"EXISTS", "k"}).is_integer(0));
}

TEST_F(BlockFormat, Fp16OfF16AndBf16AreExact) {
  std::vector<uint16_t> h(96), b(96);
  const std::vector<float> x = Ramp(96);
  for (size_t i = 0; i < 96; ++i) {
    h[i] = F32ToF16(x[i]);
    b[i] = quant::F32ToBf16(x[i]);
  }
  const std::string hs(reinterpret_cast<const char*>(h.data()), 192);
  const std::string bs(reinterpret_cast<const char*>(b.data()), 192);
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "FORMAT", "fp16", "DTYPE", "f16", "ROW", "3", "h", hs}), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "FORMAT", "FP16", "DTYPE", "BF16", "ROW", "96", "b", bs}), "OK");
  EXPECT_EQ(Run({"GET", "h"}), hs);
  EXPECT_EQ(Run({"GET", "b"}), bs);
  // The chain's links and metadata are as without FORMAT.
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "AFTER", "h", "TOKENS", "4", "FORMAT", "int8", "DTYPE", "bf16",
                 "ROW", "1", "c", bs}),
            "OK");
  store::Store::BlockInfo i;
  ASSERT_TRUE(store::OpDescribeBlock({*server().store()}, "c", &i));
  EXPECT_EQ(i.parent, "h");
  EXPECT_EQ(i.tokens, 4u);
  EXPECT_EQ(Stored("c")->size, 96u * 5);  // int8 at ROW 1: a scale and a code per value
}

TEST_F(BlockFormat, EditsRefusedSetStoresPlainBytes) {
  const std::string raw = F32Bytes(Ramp(32));
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "FORMAT", "fp8", "DTYPE", "f32", "ROW", "32", "k", raw}), "OK");
  for (auto cmd : std::vector<std::vector<std::string>>{{"GETRANGE", "k", "0", "1"},
                                                        {"SUBSTR", "k", "0", "1"},
                                                        {"SETRANGE", "k", "0", "x"},
                                                        {"APPEND", "k", "x"},
                                                        {"INCRBY", "k", "1"},
                                                        {"SETBIT", "k", "1", "1"},
                                                        {"COPY", "k", "k2"},
                                                        {"DUMP", "k"}})
    EXPECT_EQ(Run(cmd).error(), kErrBlockQuantized) << cmd[0];
  EXPECT_TRUE(Run({"EXISTS", "k2"}).is_integer(0));
  EXPECT_TRUE(Stored("k")->quantized());
  ASSERT_EQ(Run({"SET", "k", "abc"}), "OK");
  EXPECT_FALSE(Stored("k")->quantized());
  EXPECT_EQ(Run({"GETRANGE", "k", "0", "1"}), "ab");
  EXPECT_TRUE(Run({"APPEND", "k", "d"}).is_integer(4));
}

TEST_F(BlockFormat, ErrorsStoreNothing) {
  const std::string raw = F32Bytes(Ramp(64));
  auto chain = [&](std::vector<std::string> opts, std::string value) {
    std::vector<std::string> a{"KV.BLOCK.CHAIN"};
    a.insert(a.end(), opts.begin(), opts.end());
    a.push_back("k");
    a.push_back(std::move(value));
    return Run(a);
  };
  EXPECT_EQ(chain({"FORMAT", "int8"}, raw).error(), kErrChainFormatNeeds);
  EXPECT_EQ(chain({"FORMAT", "int8", "ROW", "8"}, raw).error(), kErrChainFormatNeeds);
  EXPECT_EQ(chain({"ROW", "8"}, raw).error(), kErrChainFormatAlone);
  EXPECT_EQ(chain({"FORMAT", "q4", "DTYPE", "f32", "ROW", "8"}, raw).error(), kErrChainFormat);
  EXPECT_EQ(chain({"FORMAT", "int8", "DTYPE", "fp32", "ROW", "8"}, raw).error(), kErrChainDtype);
  EXPECT_EQ(chain({"FORMAT", "turbo2", "DTYPE", "f32", "ROW", "48"}, raw).error(),
            "ERR ROW must be 1..16384 and a multiple of 32 for FORMAT turbo2");
  EXPECT_EQ(chain({"FORMAT", "int8", "DTYPE", "f32", "ROW", "-1"}, raw).error(),
            "ERR ROW must be 1..16384 for FORMAT int8");
  EXPECT_EQ(chain({"FORMAT", "int8", "DTYPE", "f32", "ROW", "48"}, raw).error(),
            "ERR value 0 is not a whole number of rows (ROW x DTYPE = 192 bytes)");
  std::vector<float> x = Ramp(64);
  x[40] = NAN;
  EXPECT_EQ(chain({"FORMAT", "mlx4g32", "DTYPE", "f32", "ROW", "32"}, F32Bytes(x)).error(),
            "ERR value 0: non-finite value in row 1 (only FORMAT fp16 stores inf and NaN)");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
  EXPECT_EQ(chain({"FORMAT", "fp16", "DTYPE", "f32", "ROW", "32"}, F32Bytes(x)), "OK");
}

TEST_F(BlockFormat, ChargedTheQuantizedBytes) {
  const std::string raw = F32Bytes(Ramp(1024 * 8));
  ASSERT_EQ(Run({"SET", "plain", raw}), "OK");
  ASSERT_EQ(Run({"KV.BLOCK.CHAIN", "FORMAT", "turbo2", "DTYPE", "f32", "ROW", "1024", "q", raw}),
            "OK");
  const int64_t plain = Run({"MEMORY", "USAGE", "plain"}).integer;
  const int64_t q = Run({"MEMORY", "USAGE", "q"}).integer;
  EXPECT_LT(q * 10, plain);  // 324 of 4096 bytes per row
  EXPECT_GE(q, static_cast<int64_t>(8 * quant::RowBytes(quant::Format::kTurbo2, 1024)));
}

}  // namespace
}  // namespace pion::server::testing
