// FrameParser and FrameWriter (the binary fast lane): every header field
// validated, each input also fed split at every byte boundary, pipelined frames,
// big bodies (copied and read directly), the gate refusing a body, limits; and
// every reply kind's response frame.
#include "net/frame_parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "net/frame_writer.h"
#include "net/output_queue.h"
#include "net/resp_errors.h"
#include "net/testing/parser_feed.h"

namespace pion::net {
namespace {

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

std::string Req(uint8_t cmd, const std::string& body) {
  std::string s = "\x5E\xCA";
  s += static_cast<char>(cmd);
  s += Le32(static_cast<uint32_t>(body.size()));
  return s + body;
}

struct Outcome : testing::FeedResult {                  // + error, complete
  std::vector<std::pair<uint8_t, std::string>> frames;  // in order
  size_t rejected = 0;
};

class DenyGate : public BufferGate {
 public:
  bool Reserve(size_t) override { return false; }
};

// Feeds `chunks` as a connection would (net/testing/parser_feed.h).
Outcome Feed(const std::vector<std::string>& chunks, ParserLimits lim = {}, bool auth = false,
             bool direct = false, BufferGate* gate = nullptr, BufferPool* pool = nullptr) {
  FrameParser p(pool);
  Outcome out;
  testing::FeedParser(p, chunks, {lim, auth, direct, gate}, &out,
                      [&](const FrameParser& fp, const std::string&) {
                        if (fp.rejected())
                          ++out.rejected;
                        else
                          out.frames.emplace_back(static_cast<uint8_t>(fp.frame().command),
                                                  std::string(fp.frame().body));
                      });
  return out;
}

void ExpectSame(const Outcome& o, const Outcome& whole, const std::string& where) {
  EXPECT_EQ(o.frames, whole.frames) << where;
  EXPECT_EQ(o.error, whole.error) << where;
}

// Whole, split at every boundary, and byte by byte: all must agree.
Outcome FeedAllSplits(const std::string& in, ParserLimits lim = {}, bool auth = false) {
  auto feed = [&](const std::vector<std::string>& chunks) { return Feed(chunks, lim, auth); };
  return testing::FeedAllSplits(in, feed, ExpectSame);
}

TEST(FrameParser, PingEmptyBody) {
  Outcome o = FeedAllSplits(Req(0xFF, ""));
  ASSERT_EQ(o.frames.size(), 1u);
  EXPECT_EQ(o.frames[0].first, 0xFF);
  EXPECT_EQ(o.frames[0].second, "");
  EXPECT_TRUE(o.error.empty());
  EXPECT_TRUE(o.complete);
}

TEST(FrameParser, EveryCommandCodeAndPipelining) {
  std::string in = Req(0xFF, "") + Req(0x37, "pw") + Req(0x24, std::string(40, 'q')) +
                   Req(0x25, std::string("a\0b", 3)) + Req(0xFF, "x");
  Outcome o = FeedAllSplits(in);
  ASSERT_EQ(o.frames.size(), 5u);
  EXPECT_EQ(o.frames[1], (std::pair<uint8_t, std::string>{0x37, "pw"}));
  EXPECT_EQ(o.frames[2].first, 0x24);
  EXPECT_EQ(o.frames[2].second, std::string(40, 'q'));
  EXPECT_EQ(o.frames[3].second, std::string("a\0b", 3));
  EXPECT_EQ(o.frames[4].second, "x");
  EXPECT_TRUE(o.complete);
}

TEST(FrameParser, BadMagicIsAnErrorOnTheFirstWrongByte) {
  for (std::string in : {std::string("*1\r\n$4\r\nPING\r\n"), std::string("\x5E\xCB\xFF") + Le32(0),
                         std::string("\xCA\x5E\xFF") + Le32(0)}) {
    Outcome o = FeedAllSplits(in);
    EXPECT_EQ(o.error, kErrFrameBadMagic) << in;
    EXPECT_TRUE(o.frames.empty());
  }
  // One byte suffices to tell: no waiting for a whole header.
  EXPECT_EQ(Feed({"*"}).error, kErrFrameBadMagic);
  EXPECT_EQ(Feed({"\x5E"}).error, "");
}

TEST(FrameParser, UnknownCommand) {
  for (int cmd : {0x00, 0x01, 0x02, 0x10, 0x23, 0x26, 0x36, 0x38, 0xFE}) {
    Outcome o = FeedAllSplits(Req(static_cast<uint8_t>(cmd), ""));
    char want[16];
    std::snprintf(want, sizeof(want), " 0x%02X", cmd);
    EXPECT_EQ(o.error, std::string(kErrFrameUnknownCommand) + want);
  }
  // Known only once its byte is there.
  EXPECT_EQ(Feed({"\x5E\xCA"}).error, "");
}

TEST(FrameParser, ErrorAfterGoodFramesKeepsThem) {
  Outcome o = FeedAllSplits(Req(0xFF, "") + Req(0xFF, "a") + std::string("\x00\x00", 2));
  EXPECT_EQ(o.frames.size(), 2u);
  EXPECT_EQ(o.error, kErrFrameBadMagic);
}

TEST(FrameParser, ErrorIsSticky) {
  FrameParser p;
  std::string bad = "XX";
  EXPECT_EQ(p.Parse(bad.data(), bad.size()), RequestParser::Result::kError);
  p.ConsumeCommand();
  std::string good = Req(0xFF, "");
  EXPECT_EQ(p.Parse(good.data(), good.size()), RequestParser::Result::kError);
}

TEST(FrameParser, BodyLengthLimit) {
  ParserLimits lim;
  lim.max_frame_body = 100;
  EXPECT_TRUE(Feed({Req(0x24, std::string(100, 'x'))}, lim).error.empty());
  // The header alone is enough: no body byte is awaited.
  std::string hdr = Req(0x24, "").substr(0, 3) + Le32(101);
  Outcome o = Feed({hdr}, lim);
  EXPECT_EQ(o.error.rfind(kErrFrameTooLong, 0), 0u) << o.error;
  EXPECT_NE(o.error.find("101 bytes"), std::string::npos);
  // A u32 length far over the default limit.
  o = Feed({Req(0x24, "").substr(0, 3) + Le32(0xFFFFFFFFu)});
  EXPECT_EQ(o.error.rfind(kErrFrameTooLong, 0), 0u);
}

TEST(FrameParser, QueryBufferLimit) {
  ParserLimits lim;
  lim.max_query_bytes = 1000;
  EXPECT_TRUE(Feed({Req(0x25, std::string(993, 'x'))}, lim).error.empty());
  EXPECT_EQ(Feed({Req(0x25, "").substr(0, 3) + Le32(994)}, lim).error, kErrQueryBufferLimit);
}

TEST(FrameParser, UnauthenticatedBodiesAreSmall) {
  std::string ok = Req(0x37, std::string(kFrameUnauthBodyBytes, 'p'));
  EXPECT_TRUE(Feed({ok}, {}, true).error.empty());
  Outcome o = Feed({Req(0x24, "").substr(0, 3) + Le32(kFrameUnauthBodyBytes + 1)}, {}, true);
  EXPECT_EQ(o.error, kErrFrameUnauthenticated);
  EXPECT_TRUE(Feed({Req(0x24, std::string(kFrameUnauthBodyBytes + 1, 'x'))}).error.empty());
}

TEST(FrameParser, BigBodyCopiedAndDirect) {
  BufferPool pool(64u << 20);
  std::string body(kBigArgBytes * 5 + 17, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 + 7);
  std::string in = Req(0x24, body) + Req(0xFF, "");
  for (bool direct : {false, true}) {
    for (size_t chunk : {size_t{1000}, size_t{kBigArgBytes}, in.size()}) {
      std::vector<std::string> chunks;
      for (size_t off = 0; off < in.size(); off += chunk) chunks.push_back(in.substr(off, chunk));
      Outcome o = Feed(chunks, {}, false, direct, nullptr, &pool);
      ASSERT_EQ(o.frames.size(), 2u) << direct << " " << chunk;
      EXPECT_EQ(o.frames[0].second, body);
      EXPECT_EQ(o.frames[1].first, 0xFF);
      EXPECT_TRUE(o.complete);
    }
  }
}

TEST(FrameParser, GrowsPastTheInitialBuffer) {
  std::string body(kBigInitialBytes + 12345, 'z');
  body[kBigInitialBytes + 5] = 'y';
  Outcome o = Feed({Req(0x25, body)}, {}, false, true);
  ASSERT_EQ(o.frames.size(), 1u);
  EXPECT_EQ(o.frames[0].second, body);
}

TEST(FrameParser, GateRefusalRejectsTheFrameNotTheStream) {
  DenyGate deny;
  std::string big(kBigArgBytes + 10, 'b');
  for (bool direct : {false, true}) {
    Outcome o = Feed({Req(0x24, big) + Req(0xFF, "after")}, {}, false, direct, &deny);
    EXPECT_TRUE(o.error.empty());
    EXPECT_EQ(o.rejected, 1u);
    ASSERT_EQ(o.frames.size(), 1u);
    EXPECT_EQ(o.frames[0].second, "after");
  }
  // Small bodies never ask the gate.
  Outcome o = Feed({Req(0x24, std::string(100, 's'))}, {}, false, false, &deny);
  EXPECT_EQ(o.frames.size(), 1u);
}

TEST(FrameParser, BytesWantedCoversTheFrame) {
  FrameParser p;
  std::string in = Req(0x25, std::string(20000, 'w'));
  EXPECT_EQ(p.Parse(in.data(), 3), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.BytesWanted(), 4u);
  EXPECT_EQ(p.Parse(in.data(), 100), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.BytesWanted(), in.size() - 100);
  EXPECT_EQ(p.Parse(in.data(), in.size()), RequestParser::Result::kCommand);
  EXPECT_EQ(p.command_bytes(), in.size());
}

// FrameWriter: what each reply kind becomes.
struct Resp {
  uint8_t status;
  std::string body;
};

std::vector<Resp> Decode(const OutputQueue& q) {
  std::string all = q.CopyAll();
  std::vector<Resp> out;
  size_t off = 0;
  while (off < all.size()) {
    EXPECT_GE(all.size() - off, kFrameHeaderBytes);
    EXPECT_EQ(static_cast<uint8_t>(all[off]), 0x5E);
    EXPECT_EQ(static_cast<uint8_t>(all[off + 1]), 0xCA);
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i)
      len |= static_cast<uint32_t>(static_cast<uint8_t>(all[off + 3 + i])) << (8 * i);
    out.push_back({static_cast<uint8_t>(all[off + 2]), all.substr(off + 7, len)});
    off += kFrameHeaderBytes + len;
    EXPECT_LE(off, all.size());
  }
  return out;
}

TEST(FrameWriter, EveryReplyKind) {
  OutputQueue q(nullptr);
  FrameWriter w(&q);
  w.SimpleString("PONG");
  w.Bulk("hello");
  w.Bulk(std::string(FrameWriter::kCopyThreshold + 3, 'L'));
  w.Null();
  w.Error("ERR bad thing");
  w.Error("COLDMISS session evicted to cold tier (call KV.PREFIX.WARM)");
  w.Error("COLDMISSX is not the code word");
  w.Error("ERR from a status");
  w.Integer(-42);
  uint8_t* p = w.BulkReserve(8);
  std::memcpy(p, "reserved", 8);
  p = w.TryBulkReserve(3);
  std::memcpy(p, "try", 3);
  w.ArrayHeader(2);
  w.Bulk("out");
  w.Bulk("lse");
  w.ArrayHeader(0);
  w.ArrayHeader(3);
  w.Bulk("a");
  w.ArrayHeader(2);
  w.Bulk("b");
  w.Null();
  w.Integer(7);
  static const char kExt[] = "external";
  iovec iov{const_cast<char*>(kExt), 8};
  w.BulkExternal(8, {&iov, 1}, nullptr);
  w.NullArray();
  EXPECT_EQ(w.errors(), 4u);
  std::vector<Resp> r = Decode(q);
  ASSERT_EQ(r.size(), 16u);
  EXPECT_EQ(r[0].status, 0);
  EXPECT_EQ(r[0].body, "");
  EXPECT_EQ(r[1].status, 0);
  EXPECT_EQ(r[1].body, "hello");
  EXPECT_EQ(r[2].body, std::string(FrameWriter::kCopyThreshold + 3, 'L'));
  EXPECT_EQ(r[3].status, 1);
  EXPECT_EQ(r[3].body, "");
  EXPECT_EQ(r[4].status, 2);
  EXPECT_EQ(r[4].body, "ERR bad thing");
  EXPECT_EQ(r[5].status, 3);
  EXPECT_EQ(r[5].body, "COLDMISS session evicted to cold tier (call KV.PREFIX.WARM)");
  EXPECT_EQ(r[6].status, 2);
  EXPECT_EQ(r[7].status, 2);
  EXPECT_EQ(r[7].body, "ERR from a status");
  EXPECT_EQ(r[8].status, 0);
  EXPECT_EQ(r[8].body, "-42");
  EXPECT_EQ(r[9].body, "reserved");
  EXPECT_EQ(r[10].body, "try");
  EXPECT_EQ(r[11].status, 0);
  EXPECT_EQ(r[11].body, "outlse");
  EXPECT_EQ(r[12].body, "");
  EXPECT_EQ(r[13].body, "ab7");
  EXPECT_EQ(r[14].body, "external");
  EXPECT_EQ(r[15].status, 1);
}

TEST(FrameWriter, ErrorStatusByCodeWordOnly) {
  EXPECT_EQ(FrameWriter::ErrorStatus("COLDMISS"), FrameStatus::kColdMiss);
  EXPECT_EQ(FrameWriter::ErrorStatus("COLDMISS anything"), FrameStatus::kColdMiss);
  EXPECT_EQ(FrameWriter::ErrorStatus("ERR COLDMISS"), FrameStatus::kError);
  EXPECT_EQ(FrameWriter::ErrorStatus("coldmiss x"), FrameStatus::kError);
  EXPECT_EQ(FrameWriter::ErrorStatus(""), FrameStatus::kError);
}

}  // namespace
}  // namespace pion::net
