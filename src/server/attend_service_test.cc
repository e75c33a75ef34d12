// The ATTEND.PREFIX handlers reached through the Service the way another transport
// (the binary fast lane) reaches them: args of the RESP twin, its own ReplyBuilder, and
// no ClientControl to defer through. Big queries then run inline (still split over the compute
// pool), the reply is written exactly once, and the cold-tier error carries its own code word.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kvproto/errors.h"
#include "server/server.h"

namespace pion::server {
namespace {

// Records the one reply a handler writes.
class CaptureReply final : public ReplyBuilder {
 public:
  int proto() const override { return 2; }
  void SimpleString(std::string_view s) override { Set("+", s); }
  void Error(std::string_view t) override { Set("-", t); }
  void Integer(int64_t v) override { Set(":", std::to_string(v)); }
  void Bulk(std::string_view s) override { Set("$", s); }
  void Null() override { Set("_", ""); }
  void NullArray() override { Set("_", ""); }
  void ArrayHeader(size_t) override { Set("*", ""); }
  void MapHeader(size_t) override { Set("%", ""); }
  void SetHeader(size_t) override { Set("~", ""); }
  void Double(double) override { Set(",", ""); }
  void Boolean(bool) override { Set("#", ""); }
  void Verbatim(std::string_view b) override { Set("=", b); }
  uint8_t* BulkReserve(size_t len) override {
    Set("$", std::string(len, '\0'));
    return reinterpret_cast<uint8_t*>(body.data());
  }
  uint8_t* TryBulkReserve(size_t len) override { return BulkReserve(len); }
  void BulkExternal(size_t, std::span<const iovec>, std::shared_ptr<const void>) override {
    Set("$", "external");
  }
  void BulkPinned(size_t, std::span<const iovec>, std::shared_ptr<const void>,
                  std::span<const PinnedBlock>) override {
    Set("$", "pinned");
  }

  std::string type, body;
  int replies = 0;

 private:
  void Set(std::string_view t, std::string_view b) {
    ++replies;
    type = t;
    body = b;
  }
};

std::string Blob(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class AttendService : public ::testing::Test {
 protected:
  AttendService() : server_(MakeConfig()) {}
  static Config MakeConfig() {
    Config c;
    c.kvcache = true;
    c.appendonly = false;
    c.attend_precision = "f32";
    c.attend_pool_min_bytes = 0;  // every query is "big": it would defer if it could
    c.attend_threads = 2;
    c.attend_max_slots = 1;
    return c;
  }
  CaptureReply Call(std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    CaptureReply r;
    ClientInfo info;
    net::ConnContext c{nullptr, &info, true};  // no ClientControl: nothing can defer
    server_.service()->Dispatch(views, r, c);
    return r;
  }
  Server server_;
};

TEST_F(AttendService, QueriesRunInlineWithoutClientControl) {
  const int h = 2, n = 3000, d = 8;
  std::vector<float> k(h * n * d), v(h * n * d), q(h * d, 0.0f);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(0.001f * i);
    v[i] = static_cast<float>(i % 7);
  }
  CaptureReply st = Call({"ATTEND.PREFIX.STORE", "lane", "0", std::to_string(h), std::to_string(n),
                          std::to_string(d), Blob(k), Blob(v)});
  ASSERT_EQ(st.type + st.body, "+OK");
  // Q = 0: uniform softmax, so every output is the mean of V over N.
  CaptureReply r = Call({"ATTEND.PREFIX.QUERY_FUSED", "lane", "0", std::to_string(h),
                         std::to_string(d), "0", std::to_string(h), Blob(q), "", "", ""});
  ASSERT_EQ(r.replies, 1);
  ASSERT_EQ(r.type, "$");
  ASSERT_EQ(r.body.size(), h * d * sizeof(float));
  std::vector<float> out(h * d);
  std::memcpy(out.data(), r.body.data(), r.body.size());
  for (int hh = 0; hh < h; ++hh) {
    for (int j = 0; j < d; ++j) {
      double mean = 0;
      for (int t = 0; t < n; ++t) mean += v[(static_cast<size_t>(hh) * n + t) * d + j];
      EXPECT_NEAR(out[hh * d + j], mean / n, 1e-4);
    }
  }
  // A second slot demotes the first (max 1 slot): the reply is the COLDMISS code word.
  ASSERT_EQ(Call({"ATTEND.PREFIX.STORE", "other", "0", "1", "1", "1", Blob({1}), Blob({1})}).type,
            "+");
  CaptureReply cold = Call(
      {"ATTEND.PREFIX.QUERY", "lane", "0", std::to_string(h), std::to_string(d), "1", Blob(q)});
  EXPECT_EQ(cold.type, "-");
  EXPECT_EQ(cold.body, kErrColdMiss);
  EXPECT_EQ(cold.body.substr(0, cold.body.find(' ')), kErrCodeColdMiss);
  // KV.PREFIX.WARM without a ClientControl answers inline too.
  CaptureReply w = Call({"KV.PREFIX.WARM", "none", "2", "8"});
  EXPECT_EQ(w.type + w.body, "+0");
}

}  // namespace
}  // namespace pion::server
