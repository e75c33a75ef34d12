// RespParser: every malformed case of Redis' tests/unit/protocol.tcl and more,
// each input also fed split at every byte boundary, pipelines, big arguments
// (copied and read directly) and limits.
#include "net/resp_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "net/testing/parser_feed.h"

namespace pion::net {
namespace {

struct Outcome : testing::FeedResult {             // + error, complete
  std::vector<std::vector<std::string>> commands;  // non-empty commands, in order
  size_t empty_commands = 0;
  size_t rejected = 0;  // read but refused (the gate): no args
};

// Feeds `chunks` as a connection would (net/testing/parser_feed.h): the region
// holds the unconsumed input, completed commands are dropped from its front.
Outcome Feed(const std::vector<std::string>& chunks, ParserLimits lim = {},
             bool auth_required = false, BufferPool* pool = nullptr, bool direct = false,
             BufferGate* gate = nullptr) {
  RespParser p(pool);
  Outcome out;
  testing::FeedParser(p, chunks, {lim, auth_required, direct, gate}, &out,
                      [&](const RespParser& rp, const std::string&) {
                        if (rp.rejected()) ++out.rejected;
                        if (rp.args().empty()) {
                          ++out.empty_commands;
                          return;
                        }
                        out.commands.emplace_back(rp.args().begin(), rp.args().end());
                      });
  return out;
}

void ExpectSame(const Outcome& o, const Outcome& whole, const std::string& where) {
  EXPECT_EQ(o.commands, whole.commands) << where;
  EXPECT_EQ(o.error, whole.error) << where;
  EXPECT_EQ(o.empty_commands, whole.empty_commands) << where;
}

// Feeds the input whole, then split at every byte boundary (two pieces), then
// one byte at a time; all must agree.
Outcome FeedAllSplits(const std::string& in, ParserLimits lim = {}, bool auth = false) {
  auto feed = [&](const std::vector<std::string>& chunks) { return Feed(chunks, lim, auth); };
  return testing::FeedAllSplits(in, feed, ExpectSame);
}

using Cmds = std::vector<std::vector<std::string>>;

TEST(RespParser, SimpleMultibulk) {
  auto o = FeedAllSplits("*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(o.commands, (Cmds{{"PING"}}));
  EXPECT_EQ(o.error, "");
}

TEST(RespParser, BinarySafeArgs) {
  std::string arg("a\0b\r\nc", 6);
  auto o = FeedAllSplits("*2\r\n$4\r\nECHO\r\n$6\r\n" + arg + "\r\n");
  ASSERT_EQ(o.commands.size(), 1u);
  EXPECT_EQ(o.commands[0][1], arg);
}

TEST(RespParser, EmptyBulk) {
  auto o = FeedAllSplits("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
  EXPECT_EQ(o.commands, (Cmds{{"ECHO", ""}}));
}

TEST(RespParser, Pipeline) {
  std::string in;
  for (int i = 0; i < 50; ++i)
    in += "*2\r\n$4\r\nECHO\r\n$" + std::to_string(std::to_string(i).size()) + "\r\n" +
          std::to_string(i) + "\r\n";
  in += "PING\r\n";
  auto o = FeedAllSplits(in);
  ASSERT_EQ(o.commands.size(), 51u);
  EXPECT_EQ(o.commands[49][1], "49");
  EXPECT_EQ(o.commands[50], (std::vector<std::string>{"PING"}));
}

// protocol.tcl "Handle an empty query".
TEST(RespParser, EmptyInlineLinesIgnored) {
  auto o = FeedAllSplits("\r\n\n   \r\nPING\r\n");
  EXPECT_EQ(o.commands, (Cmds{{"PING"}}));
  EXPECT_EQ(o.empty_commands, 3u);
}

// protocol.tcl "Negative multibulk length": an empty command.
TEST(RespParser, NegativeMultibulkLengthIsEmpty) {
  auto o = FeedAllSplits("*-10\r\nPING\r\n");
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, (Cmds{{"PING"}}));
  EXPECT_EQ(o.empty_commands, 1u);
}

TEST(RespParser, ZeroMultibulkIsEmpty) {
  auto o = FeedAllSplits("*0\r\n*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(o.commands, (Cmds{{"PING"}}));
  EXPECT_EQ(o.empty_commands, 1u);
}

// protocol.tcl "Out of range multibulk length".
TEST(RespParser, OutOfRangeMultibulkLength) {
  auto o = FeedAllSplits("*3000000000\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: invalid multibulk length");
}

TEST(RespParser, MultibulkLengthOverArgLimit) {
  ParserLimits lim;
  lim.max_args = 4;
  EXPECT_EQ(Feed({"*5\r\n"}, lim).error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(Feed({"*4\r\n"}, lim).error, "");
  EXPECT_EQ(FeedAllSplits("*1048577\r\n").error, "ERR Protocol error: invalid multibulk length");
}

TEST(RespParser, BadMultibulkNumbers) {
  for (const char* in : {"*abc\r\n", "*\r\n", "*+1\r\n", "*01\r\n", "*-0\r\n", "*1 \r\n", "*1\rX",
                         "*99999999999999999999\r\n"}) {
    EXPECT_EQ(FeedAllSplits(in).error, "ERR Protocol error: invalid multibulk length") << in;
  }
}

// protocol.tcl "Wrong multibulk payload header".
TEST(RespParser, WrongMultibulkPayloadHeader) {
  auto o = FeedAllSplits("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: expected '$', got 'f'");
  EXPECT_TRUE(o.commands.empty());
}

// protocol.tcl "Negative multibulk payload length".
TEST(RespParser, NegativeBulkLength) {
  auto o = FeedAllSplits("*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: invalid bulk length");
}

// protocol.tcl "Out of range multibulk payload length".
TEST(RespParser, OutOfRangeBulkLength) {
  auto o = FeedAllSplits("*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: invalid bulk length");
}

TEST(RespParser, BulkLengthLimitIsConfigurable) {
  ParserLimits lim;
  lim.max_bulk_len = 10;
  EXPECT_EQ(Feed({"*1\r\n$11\r\n"}, lim).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(Feed({"*1\r\n$10\r\n0123456789\r\n"}, lim).commands, (Cmds{{"0123456789"}}));
}

// protocol.tcl "Non-number multibulk payload length".
TEST(RespParser, NonNumberBulkLength) {
  auto o = FeedAllSplits("*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits("*1\r\n$\r\n").error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits("*1\r\n$4\rXPING\r\n").error, "ERR Protocol error: invalid bulk length");
}

// protocol.tcl "Multi bulk request not followed by bulk arguments".
TEST(RespParser, MultibulkNotFollowedByBulk) {
  auto o = FeedAllSplits("*1\r\nfoo\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: expected '$', got 'f'");
}

TEST(RespParser, MissingCrlfAfterBulk) {
  EXPECT_EQ(FeedAllSplits("*1\r\n$4\r\nPINGxx*1\r\n").error,
            "ERR Protocol error: expected CRLF after bulk argument");
  EXPECT_EQ(FeedAllSplits("*1\r\n$4\r\nPING\n\r").error,
            "ERR Protocol error: expected CRLF after bulk argument");
}

// protocol.tcl "Unbalanced number of quotes".
TEST(RespParser, UnbalancedQuotes) {
  auto o = FeedAllSplits("set \"\"\"test-key\"\"\" test-value\r\nping\r\n");
  EXPECT_EQ(o.error, "ERR Protocol error: unbalanced quotes in request");
  EXPECT_EQ(FeedAllSplits("echo 'abc\r\n").error,
            "ERR Protocol error: unbalanced quotes in request");
  EXPECT_EQ(FeedAllSplits("echo \"abc\"def\r\n").error,
            "ERR Protocol error: unbalanced quotes in request");
}

TEST(RespParser, InlineQuotingAsRedis) {
  auto o = FeedAllSplits("set \"a b\" 'c d' \"\\x41\\n\\t\" 'it\\'s' plain\r\n");
  ASSERT_EQ(o.commands.size(), 1u);
  EXPECT_EQ(o.commands[0],
            (std::vector<std::string>{"set", "a b", "c d", "A\n\t", "it's", "plain"}));
  // LF-only line ends and tabs between args.
  EXPECT_EQ(FeedAllSplits("ECHO\thello\n").commands, (Cmds{{"ECHO", "hello"}}));
  // An empty quoted argument is an argument.
  EXPECT_EQ(FeedAllSplits("ECHO \"\"\r\n").commands, (Cmds{{"ECHO", ""}}));
}

// protocol.tcl "Protocol desync regression test" #1..#3: a line that never
// ends is refused once it passes 64 KiB.
TEST(RespParser, DesyncTooBigInline) {
  std::string junk(70 * 1024, 'A');
  EXPECT_EQ(Feed({std::string("\x00", 1), junk}).error,
            "ERR Protocol error: too big inline request");
  EXPECT_EQ(Feed({"$", std::string("\x00", 1), junk}).error,
            "ERR Protocol error: too big inline request");
  EXPECT_EQ(Feed({"*", std::string("\x00", 1), junk}).error,
            "ERR Protocol error: too big mbulk count string");
  EXPECT_EQ(Feed({"*1\r\n$", junk}).error, "ERR Protocol error: too big bulk count string");
}

TEST(RespParser, InlineArgsCountTowardsArgLimit) {
  ParserLimits lim;
  lim.max_args = 3;
  EXPECT_EQ(Feed({"a b c\r\n"}, lim).commands.size(), 1u);
  EXPECT_EQ(Feed({"a b c d\r\n"}, lim).error, "ERR Protocol error: too big inline request");
}

TEST(RespParser, UnauthenticatedLimits) {
  EXPECT_EQ(Feed({"*11\r\n"}, {}, true).error,
            "ERR Protocol error: unauthenticated multibulk length");
  EXPECT_EQ(Feed({"*10\r\n"}, {}, true).error, "");
  EXPECT_EQ(Feed({"*1\r\n$16385\r\n"}, {}, true).error,
            "ERR Protocol error: unauthenticated bulk length");
  EXPECT_EQ(Feed({"*1\r\n$16384\r\n"}, {}, true).error, "");
}

TEST(RespParser, QueryBufferLimitCheckedBeforeAllocating) {
  ParserLimits lim;
  lim.max_query_bytes = 100000;
  auto o = Feed({"*2\r\n$50000\r\n" + std::string(50000, 'x') + "\r\n$60000\r\n"}, lim);
  EXPECT_EQ(o.error, "ERR Protocol error: client query buffer limit exceeded");
}

TEST(RespParser, ErrorIsSticky) {
  RespParser p;
  std::string in = "*1\r\nfoo\r\n";
  EXPECT_EQ(p.Parse(in.data(), in.size()), RespParser::Result::kError);
  std::string ok = "*1\r\n$4\r\nPING\r\n";
  EXPECT_EQ(p.Parse(ok.data(), ok.size()), RespParser::Result::kError);
}

std::string BigCommand(size_t n, char fill) {
  return "*2\r\n$3\r\nSET\r\n$" + std::to_string(n) + "\r\n" + std::string(n, fill) + "\r\n";
}

TEST(RespParser, BigArgumentCopiedOrDirect) {
  BufferPool pool(64 << 20);
  for (bool direct : {false, true}) {
    for (size_t n : {kBigArgBytes - 1, kBigArgBytes, size_t{1} << 20}) {
      std::string in = BigCommand(n, 'z') + "*1\r\n$4\r\nPING\r\n";
      // Chunked like socket reads of various sizes.
      for (size_t chunk : {size_t{1000}, size_t{4096}, size_t{65536}, in.size()}) {
        std::vector<std::string> chunks;
        for (size_t i = 0; i < in.size(); i += chunk) chunks.push_back(in.substr(i, chunk));
        Outcome o = Feed(chunks, {}, false, &pool, direct);
        ASSERT_EQ(o.error, "") << n << " " << chunk;
        ASSERT_EQ(o.commands.size(), 2u) << n << " " << chunk;
        EXPECT_EQ(o.commands[0][1].size(), n);
        EXPECT_EQ(o.commands[0][1], std::string(n, 'z'));
        EXPECT_EQ(o.commands[1][0], "PING");
      }
    }
  }
}

TEST(RespParser, BigArgumentIsAlignedAndDirectTargetExact) {
  RespParser p;
  std::string head = "*2\r\n$3\r\nSET\r\n$100000\r\nabc";
  ASSERT_EQ(p.Parse(head.data(), head.size()), RespParser::Result::kNeedMore);
  ASSERT_TRUE(p.WantsDirectRead());
  auto t = p.DirectTarget();
  EXPECT_EQ(t.size(), 100000u + 2 - 3);
  std::memset(t.data(), 'q', t.size() - 2);
  std::memcpy(t.data() + t.size() - 2, "\r\n", 2);
  p.DirectFilled(t.size());
  EXPECT_FALSE(p.WantsDirectRead());
  ASSERT_EQ(p.Parse(head.data(), head.size()), RespParser::Result::kCommand);
  ASSERT_EQ(p.args().size(), 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.args()[1].data()) % 64, 0u);
  EXPECT_EQ(p.args()[1].substr(0, 4), "abcq");
  EXPECT_EQ(p.command_bytes(), head.size());
}

// TakeBigArg gives away the buffer a big argument was read into: the view stays
// valid while the new owner keeps it, the parser no longer holds it, and only the
// start of a big argument matches (a small argument, an inner address, a second
// take get nothing).
TEST(RespParser, TakeBigArgGivesAwayTheBuffer) {
  BufferPool pool(64 << 20);
  RespParser p(&pool);
  std::string in = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + std::to_string(kBigArgBytes) + "\r\n" +
                   std::string(kBigArgBytes, 'v') + "\r\n";
  ASSERT_EQ(p.Parse(in.data(), in.size()), RespParser::Result::kCommand);
  ASSERT_EQ(p.args().size(), 3u);
  std::string_view value = p.args()[2];
  EXPECT_TRUE(p.TakeBigArg(p.args()[1].data()).empty());
  EXPECT_TRUE(p.TakeBigArg(value.data() + 1).empty());
  size_t held = p.allocated_bytes();
  OwnedBuffer b = p.TakeBigArg(value.data());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.data(), value.data());
  EXPECT_GE(b.capacity(), kBigArgBytes + 2);
  EXPECT_EQ(p.allocated_bytes(), held - b.capacity());
  EXPECT_TRUE(p.TakeBigArg(value.data()).empty());
  p.ConsumeCommand();
  // The next request parses into a buffer of its own.
  std::string in2 = "*2\r\n$3\r\nSET\r\n$" + std::to_string(kBigArgBytes) + "\r\n" +
                    std::string(kBigArgBytes, 'w') + "\r\n";
  ASSERT_EQ(p.Parse(in2.data(), in2.size()), RespParser::Result::kCommand);
  EXPECT_NE(p.args()[1].data(), static_cast<const char*>(b.data()));
  EXPECT_EQ(std::string_view(static_cast<const char*>(b.data()), kBigArgBytes),
            std::string(kBigArgBytes, 'v'));
  p.ConsumeCommand();
}

// Admits `budget` bytes of big-argument buffers in all, then refuses.
class BudgetGate : public BufferGate {
 public:
  explicit BudgetGate(size_t budget) : left_(budget) {}
  bool Reserve(size_t bytes) override {
    if (bytes > left_) return false;
    left_ -= bytes;
    return true;
  }

 private:
  size_t left_;
};

// A refused buffer rejects the command (its bytes read and dropped, no args),
// never the connection: the next command parses. Refused at the first buffer
// of a big argument, and while one grows (after an earlier big argument of the
// same command was admitted); later big and small arguments are skipped.
TEST(RespParser, GateRefusalRejectsTheCommandNotTheStream) {
  const size_t small_big = kBigArgBytes + 5, grown = kBigInitialBytes + 1000;
  std::string rejected = "*5\r\n$3\r\nSET\r\n" + std::string("$") + std::to_string(small_big) +
                         "\r\n" + std::string(small_big, 'a') + "\r\n$" + std::to_string(grown) +
                         "\r\n" + std::string(grown, 'b') + "\r\n$" + std::to_string(kBigArgBytes) +
                         "\r\n" + std::string(kBigArgBytes, 'c') + "\r\n$1\r\nv\r\n";
  std::string in = rejected + "*2\r\n$4\r\nECHO\r\n$5\r\nafter\r\n";
  // 0: refused at once; the other budget admits the first argument and the
  // second one's first buffer, and refuses its growth.
  for (size_t budget : {size_t{0}, small_big + 2 + kBigInitialBytes}) {
    for (bool direct : {false, true}) {
      for (size_t chunk : {size_t{1000}, size_t{65536}, in.size()}) {
        std::vector<std::string> chunks;
        for (size_t i = 0; i < in.size(); i += chunk) chunks.push_back(in.substr(i, chunk));
        BudgetGate gate(budget);
        Outcome o = Feed(chunks, {}, false, nullptr, direct, &gate);
        SCOPED_TRACE(std::to_string(budget) + " " + std::to_string(direct) + " " +
                     std::to_string(chunk));
        EXPECT_EQ(o.error, "");
        EXPECT_EQ(o.rejected, 1u);
        EXPECT_EQ(o.empty_commands, 1u);  // the rejected one: no args
        EXPECT_EQ(o.commands, (Cmds{{"ECHO", "after"}}));
        EXPECT_TRUE(o.complete);
      }
    }
  }
  // With room, the same command parses whole.
  BudgetGate roomy(64u << 20);
  Outcome o = Feed({in}, {}, false, nullptr, false, &roomy);
  ASSERT_EQ(o.commands.size(), 2u);
  EXPECT_EQ(o.rejected, 0u);
  EXPECT_EQ(o.commands[0][2], std::string(grown, 'b'));
}

// Records what the gate admitted.
class CountingGate : public BufferGate {
 public:
  bool Reserve(size_t bytes) override {
    admitted += bytes;
    ++calls;
    return true;
  }
  size_t admitted = 0;
  int calls = 0;
};

uint8_t PatternByte(size_t i) { return static_cast<uint8_t>((i * 131 + 7) % 251); }

// A big argument larger than the first admitted step is read into one buffer
// of its whole size: every direct target continues where the last read ended
// (never moved, grown or copied), even when it arrives in many small reads; the
// gate admits kBigInitialBytes after the header alone, then doubling, in all
// exactly the argument; what the parser reports holding never exceeds what
// was admitted.
TEST(RespParser, BigArgumentIsOneBufferOfItsWholeSize) {
  const size_t n = 2 * kBigInitialBytes + 12345;
  for (size_t read : {size_t{7777}, size_t{1} << 20}) {
    SCOPED_TRACE(read);
    CountingGate gate;
    RespParser p;
    p.set_gate(&gate);
    std::string head = "*2\r\n$3\r\nSET\r\n$" + std::to_string(n) + "\r\n";
    head.push_back(static_cast<char>(PatternByte(0)));
    ASSERT_EQ(p.Parse(head.data(), head.size()), RespParser::Result::kNeedMore);
    EXPECT_EQ(gate.admitted, kBigInitialBytes);  // not the whole size for a header
    ASSERT_TRUE(p.WantsDirectRead());
    size_t filled = 1;  // the byte that came with the header
    char* base = p.DirectTarget().data() - filled;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 64, 0u);
    for (size_t rounds = 0; p.WantsDirectRead() && rounds < n / read + 16; ++rounds) {
      std::span<char> t = p.DirectTarget();
      ASSERT_EQ(t.data(), base + filled);
      ASSERT_LE(filled + t.size(), n + 2);
      size_t k = std::min(read, t.size());
      for (size_t i = 0; i < k; ++i) {
        size_t at = filled + i;
        t[i] = at < n ? static_cast<char>(PatternByte(at)) : (at == n ? '\r' : '\n');
      }
      p.DirectFilled(k);
      filled += k;
      ASSERT_LE(p.allocated_bytes(), gate.admitted);
      ASSERT_LE(gate.admitted, std::max(kBigInitialBytes, 2 * filled));
    }
    EXPECT_FALSE(p.WantsDirectRead());
    EXPECT_EQ(filled, n + 2);
    ASSERT_EQ(p.Parse(head.data(), head.size()), RespParser::Result::kCommand);
    ASSERT_EQ(p.args().size(), 2u);
    ASSERT_EQ(p.args()[1].size(), n);
    EXPECT_EQ(p.args()[1].data(), base);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += static_cast<uint8_t>(p.args()[1][i]) != PatternByte(i);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(gate.admitted, n + 2);
    EXPECT_EQ(gate.calls, 3);  // 4 MiB, 4 MiB more, the rest
    p.ConsumeCommand();
    EXPECT_EQ(p.allocated_bytes(), 0u);
  }
}

// Pipelined big arguments across the first admitted step, fed in socket-like
// chunks, copied from the region or read directly, with and without a pool:
// each comes out whole and the commands around them are intact.
TEST(RespParser, PipelinedBigArgumentsPastTheFirstStep) {
  BufferPool pool(64 << 20);
  const size_t a = kBigInitialBytes + 1000, b = 2 * kBigInitialBytes + 1;
  std::string in = BigCommand(a, 'a') + "*1\r\n$4\r\nPING\r\n" + BigCommand(b, 'b') +
                   BigCommand(kBigArgBytes, 'c') + BigCommand(a, 'd');
  for (BufferPool* pl : {static_cast<BufferPool*>(nullptr), &pool}) {
    for (bool direct : {false, true}) {
      for (size_t chunk : {size_t{65536}, size_t{1} << 20, in.size()}) {
        SCOPED_TRACE(std::to_string(pl != nullptr) + " " + std::to_string(direct) + " " +
                     std::to_string(chunk));
        std::vector<std::string> chunks;
        for (size_t i = 0; i < in.size(); i += chunk) chunks.push_back(in.substr(i, chunk));
        CountingGate gate;
        Outcome o = Feed(chunks, {}, false, pl, direct, &gate);
        ASSERT_EQ(o.error, "");
        ASSERT_EQ(o.commands.size(), 5u);
        EXPECT_EQ(o.commands[0][1], std::string(a, 'a'));
        EXPECT_EQ(o.commands[1][0], "PING");
        EXPECT_EQ(o.commands[2][1], std::string(b, 'b'));
        EXPECT_EQ(o.commands[3][1], std::string(kBigArgBytes, 'c'));
        EXPECT_EQ(o.commands[4][1], std::string(a, 'd'));
        EXPECT_TRUE(o.complete);
      }
    }
  }
}

// The memory bound: a budget of one and a half steps admits a big argument's
// first step and refuses the second; the command is rejected (its bytes
// discarded), the parser never held more than was admitted, and the next
// command parses.
TEST(RespParser, BigArgumentGrowthStopsAtTheBudget) {
  const size_t budget = kBigInitialBytes + kBigInitialBytes / 2;
  const size_t n = 3 * kBigInitialBytes;
  std::string in = BigCommand(n, 'x') + "*2\r\n$4\r\nECHO\r\n$2\r\nok\r\n";
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct);
    BudgetGate gate(budget);
    RespParser p;
    p.set_gate(&gate);
    size_t most = 0;
    size_t pos = 0, rejected = 0;
    std::vector<std::string> got;
    std::string region;
    // Fed 64 KiB at a time as a connection would (net/testing/parser_feed.h),
    // watching what the parser holds after every step.
    for (size_t rounds = 0; pos < in.size() && rounds < in.size() / 1024; ++rounds) {
      if (direct && p.WantsDirectRead()) {
        std::span<char> t = p.DirectTarget();
        size_t k = std::min({t.size(), in.size() - pos, size_t{65536}});
        std::memcpy(t.data(), in.data() + pos, k);
        p.DirectFilled(k);
        pos += k;
      } else {
        size_t k = std::min(in.size() - pos, size_t{65536});
        region.append(in, pos, k);
        pos += k;
      }
      while (true) {
        RespParser::Result r = p.Parse(region.data(), region.size());
        most = std::max(most, p.allocated_bytes());
        ASSERT_NE(r, RespParser::Result::kError);
        if (r == RespParser::Result::kNeedMore) break;
        if (p.rejected())
          ++rejected;
        else
          for (std::string_view v : p.args()) got.emplace_back(v);
        region.erase(0, p.command_bytes());
        p.ConsumeCommand();
      }
    }
    EXPECT_EQ(pos, in.size());
    EXPECT_EQ(rejected, 1u);
    EXPECT_EQ(got, (std::vector<std::string>{"ECHO", "ok"}));
    EXPECT_LE(most, kBigInitialBytes + 65536);  // the first step (+ a discard buffer)
    EXPECT_EQ(p.allocated_bytes(), 0u);
  }
}

TEST(RespParser, BigArgumentBadTerminator) {
  std::string in = "*1\r\n$40000\r\n" + std::string(40000, 'a') + "XY";
  EXPECT_EQ(Feed({in}).error, "ERR Protocol error: expected CRLF after bulk argument");
}

TEST(RespParser, ManyArgs) {
  std::string in = "*10001\r\n$4\r\nMSET\r\n";
  for (int i = 0; i < 10000; ++i) in += "$1\r\nk\r\n";
  auto o = Feed({in});
  ASSERT_EQ(o.commands.size(), 1u);
  EXPECT_EQ(o.commands[0].size(), 10001u);
}

// A whole command in the buffer takes the one-pass path (ParseWhole); every
// input here is also fed split, which takes the incremental path: both must
// give the same commands and errors at the edges of the one-pass path (its
// argument count, an argument just under and at the big-argument size, length
// lines it does not take: leading zeros, signs, too many digits, a bare LF).
TEST(RespParser, WholeCommandPathAgreesWithIncrementalAtItsEdges) {
  auto cmd = [](size_t n, size_t arg_len) {
    std::string s = "*" + std::to_string(n) + "\r\n";
    for (size_t i = 0; i < n; ++i)
      s += "$" + std::to_string(arg_len) + "\r\n" + std::string(arg_len, 'a' + i % 26) + "\r\n";
    return s;
  };
  for (size_t n : {1, 63, 64, 65}) {
    auto o = FeedAllSplits(cmd(n, 3));
    ASSERT_EQ(o.commands.size(), 1u) << n;
    EXPECT_EQ(o.commands[0].size(), n);
    EXPECT_EQ(o.commands[0].back(), std::string(3, 'a' + (n - 1) % 26));
  }
  for (size_t len : {0, 1, 32767, 32768}) {
    auto o = Feed({cmd(2, len)});
    ASSERT_EQ(o.commands.size(), 1u) << len;
    EXPECT_EQ(o.commands[0][1], std::string(len, 'b'));
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(FeedAllSplits("*1\r\n$04\r\nPING\r\n").error,
            "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits("*01\r\n$4\r\nPING\r\n").error,
            "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(FeedAllSplits("*1\r\n$+4\r\nPING\r\n").error,
            "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits("*1\r\n$4\nPING\r\n").error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits("*1\r\n$4\r\nPINGx\n").error,
            "ERR Protocol error: expected CRLF after bulk argument");
  // Ten digits of length: not the one-pass path; the general one decides.
  auto big = FeedAllSplits("*1\r\n$0000000004\r\nPING\r\n");
  EXPECT_EQ(big.error, "ERR Protocol error: invalid bulk length");
  // Two whole commands and a partial third in one buffer.
  auto o = Feed(
      {"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nGET", "\r\n$2\r\nkk\r\n"});
  EXPECT_EQ(o.commands, (Cmds{{"PING"}, {"GET", "k"}, {"GET", "kk"}}));
  // The limits apply on both paths: unauthenticated, more than 10 arguments
  // or a bulk over 16384 bytes; a configured smaller bulk limit.
  EXPECT_EQ(FeedAllSplits(cmd(11, 1), {}, true).error,
            "ERR Protocol error: unauthenticated multibulk length");
  EXPECT_EQ(Feed({cmd(1, 16385)}, {}, true).error,
            "ERR Protocol error: unauthenticated bulk length");
  ParserLimits lim;
  lim.max_bulk_len = 4;
  EXPECT_EQ(FeedAllSplits(cmd(1, 5), lim).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits(cmd(1, 4), lim).commands.size(), 1u);
}

// A command of more than kWholeMaxArgs arguments: past its first length line
// the arguments are taken a run at a time (BulkRun) wherever they are whole;
// fed split at every byte, any argument may be the one cut. One odd or bad
// argument inside the run hands over to the general path, which must give the
// same command or error as always.
TEST(RespParser, RunOfWholeArgumentsAgreesWithTheGeneralPath) {
  auto cmd = [](const std::string& odd) {
    std::string s = "*100\r\n";
    for (int i = 0; i < 100; ++i)
      s += i == 70 ? odd : "$3\r\n" + std::string(3, static_cast<char>('a' + i % 26)) + "\r\n";
    return s;
  };
  auto ok = FeedAllSplits(cmd("$0\r\n\r\n"));
  ASSERT_EQ(ok.commands.size(), 1u);
  ASSERT_EQ(ok.commands[0].size(), 100u);
  EXPECT_EQ(ok.commands[0][70], "");
  EXPECT_EQ(ok.commands[0][99], "vvv");
  EXPECT_EQ(FeedAllSplits(cmd("$04\r\nabcd\r\n")).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits(cmd("$-1\r\n")).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(FeedAllSplits(cmd("$4\r\nabcdx\n")).error,
            "ERR Protocol error: expected CRLF after bulk argument");
  EXPECT_EQ(FeedAllSplits(cmd("x4\r\nabcd\r\n")).error,
            "ERR Protocol error: expected '$', got 'x'");
  ParserLimits lim;
  lim.max_bulk_len = 3;
  EXPECT_EQ(FeedAllSplits(cmd("$4\r\nabcd\r\n"), lim).error,
            "ERR Protocol error: invalid bulk length");
  lim = ParserLimits{};
  lim.max_query_bytes = 600;
  EXPECT_EQ(FeedAllSplits(cmd("$300\r\n" + std::string(300, 'z') + "\r\n"), lim).error,
            "ERR Protocol error: client query buffer limit exceeded");
}

TEST(RespParser, SplitInlineArgsNulEndsLine) {
  std::string arena;
  std::vector<std::string_view> v;
  ASSERT_TRUE(SplitInlineArgs(std::string_view("a b\0c d", 7), &arena, &v));
  EXPECT_EQ(v.size(), 2u);
}

}  // namespace
}  // namespace pion::net
