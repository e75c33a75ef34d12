// FrameToRequest: each lane command's body becomes its RESP twin's arguments,
// every field read from its place, blobs as views into the body; bodies that do
// not follow the layout (any truncation, trailing bytes other than a 4-byte
// fa_window, sizes that overflow) are malformed.
#include "server/fastlane.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pion::server {
namespace {

std::string U16(uint32_t v) {
  return std::string{static_cast<char>(v & 0xFF), static_cast<char>(v >> 8)};
}
std::string U32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

std::vector<std::string> Args(net::FrameCommand cmd, const std::string& body, std::string* err) {
  LaneRequest r;
  err->clear();
  if (!FrameToRequest(net::Frame{cmd, body}, &r, err)) return {};
  std::vector<std::string> out;
  for (std::string_view a : r.args()) out.emplace_back(a);
  return out;
}

std::string FusedBody(const std::string& sid, uint32_t layer, uint32_t hq, uint32_t d, uint32_t hkv,
                      uint32_t m, uint32_t s, const std::string& q, const std::string& k,
                      const std::string& v, const std::string& hm) {
  return U16(static_cast<uint32_t>(sid.size())) + sid + U16(layer) + U16(hq) + U16(d) + U16(hkv) +
         U32(m) + U32(s) + q + k + v + hm;
}

TEST(FastLane, PingAndAuth) {
  std::string err;
  EXPECT_EQ(Args(net::FrameCommand::kPing, "", &err), (std::vector<std::string>{"PING"}));
  EXPECT_EQ(Args(net::FrameCommand::kPing, "hi", &err), (std::vector<std::string>{"PING", "hi"}));
  EXPECT_EQ(Args(net::FrameCommand::kAuth, "secret", &err),
            (std::vector<std::string>{"AUTH", "secret"}));
  EXPECT_EQ(Args(net::FrameCommand::kAuth, std::string("bob\0pw", 6), &err),
            (std::vector<std::string>{"AUTH", "bob", "pw"}));
  EXPECT_EQ(Args(net::FrameCommand::kAuth, "", &err), (std::vector<std::string>{"AUTH", ""}));
}

TEST(FastLane, QueryFusedEveryField) {
  // H_q = 4, D = 2, H_kv = 2, M = 1, S_suf = 3: distinct bytes in every blob.
  std::string q(4 * 1 * 2 * 4, 'q'), k(2 * 3 * 2 * 4, 'k'), v(2 * 3 * 2 * 4, 'v');
  q[0] = 'Q';
  k.back() = 'K';
  v[5] = 'V';
  std::string hm = std::string("\0\0\1\1", 4);
  std::string sid("s\0id", 4);
  std::string body = FusedBody(sid, 513, 4, 2, 2, 1, 3, q, k, v, hm);
  std::string err;
  std::vector<std::string> want = {
      "ATTEND.PREFIX.QUERY_FUSED", sid, "513", "4", "2", "3", "2", q, k, v, hm};
  EXPECT_EQ(Args(net::FrameCommand::kQueryFused, body, &err), want);
  EXPECT_EQ(err, "");
  // With fa_window (i32: 0xFFFFFFFF is -1).
  want.push_back("64");
  EXPECT_EQ(Args(net::FrameCommand::kQueryFused, body + U32(64), &err), want);
  want.back() = "-1";
  EXPECT_EQ(Args(net::FrameCommand::kQueryFused, body + U32(0xFFFFFFFFu), &err), want);
  // S_suf = 0: empty K/V; the 18-byte minimum body.
  std::string min = FusedBody("", 0, 0, 0, 0, 0, 0, "", "", "", "");
  EXPECT_EQ(min.size(), 18u);
  EXPECT_EQ(Args(net::FrameCommand::kQueryFused, min, &err),
            (std::vector<std::string>{"ATTEND.PREFIX.QUERY_FUSED", "", "0", "0", "0", "0", "0", "",
                                      "", "", ""}));
}

TEST(FastLane, QueryFusedMalformed) {
  std::string q(8 * 4, 'q'), k(2 * 4, 'k'), v(2 * 4, 'v'), hm(8, '\0');
  std::string body = FusedBody("sid", 0, 8, 1, 1, 4, 2, std::string(8 * 4 * 1 * 4, 'q'),
                               std::string(1 * 2 * 1 * 4, 'k'), std::string(8, 'v'), hm);
  std::string err;
  ASSERT_FALSE(Args(net::FrameCommand::kQueryFused, body, &err).empty());
  // Every truncation is malformed, and so is every trailing length but 0 and 4.
  for (size_t cut = 0; cut < body.size(); ++cut) {
    EXPECT_TRUE(Args(net::FrameCommand::kQueryFused, body.substr(0, cut), &err).empty()) << cut;
    EXPECT_EQ(err.rfind("ERR Protocol error: malformed fast-lane QUERY_FUSED frame body (", 0), 0u)
        << err;
  }
  for (size_t extra : {1, 2, 3, 5, 8}) {
    EXPECT_TRUE(
        Args(net::FrameCommand::kQueryFused, body + std::string(extra, '\0'), &err).empty());
    EXPECT_NE(err.find("fa_window"), std::string::npos);
  }
  // Shape fields whose product overflows 64 bits are only "shorter than".
  std::string huge =
      FusedBody("", 0, 65535, 65535, 65535, 0xFFFFFFFFu, 0xFFFFFFFFu, "", "", "", "");
  EXPECT_TRUE(Args(net::FrameCommand::kQueryFused, huge, &err).empty());
  EXPECT_NE(err.find("shorter"), std::string::npos);
}

TEST(FastLane, QueryEveryField) {
  std::string q(2 * 3 * 4 * 4, 'q');
  q[7] = 'X';
  std::string body = U16(5) + "abcde" + U16(7) + U16(2) + U16(4) + U32(3) + q;
  std::string err;
  std::vector<std::string> want = {"ATTEND.PREFIX.QUERY", "abcde", "7", "2", "4", "1", q};
  EXPECT_EQ(Args(net::FrameCommand::kQuery, body, &err), want);
  want.push_back("0");
  EXPECT_EQ(Args(net::FrameCommand::kQuery, body + U32(0), &err), want);
  for (size_t cut = 0; cut < body.size(); ++cut) {
    EXPECT_TRUE(Args(net::FrameCommand::kQuery, body.substr(0, cut), &err).empty()) << cut;
    EXPECT_EQ(err.rfind("ERR Protocol error: malformed fast-lane QUERY frame body (", 0), 0u);
  }
  EXPECT_TRUE(Args(net::FrameCommand::kQuery, body + "xy", &err).empty());
}

}  // namespace
}  // namespace pion::server
