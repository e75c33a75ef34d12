// The observability building blocks on their own: the COMMAND DOCS grammar,
// latency buckets, per-worker command counters, the slow log, the latency
// monitor, and Observability, which feeds them and MONITOR after each command.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/strutil.h"
#include "server/command_stats.h"
#include "server/commands/command_docs.h"
#include "server/commands/command_table.h"
#include "server/latency_monitor.h"
#include "server/observability.h"
#include "server/slowlog.h"

namespace pion::server {
namespace {

TEST(DocSyntax, TokensValuesOptionalOneofMultiple) {
  std::vector<DocArg> a = ParseDocSyntax("key value [NX | XX] [EX seconds | KEEPTTL] [id...]");
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].type, "key");
  EXPECT_EQ(a[1].type, "string");
  EXPECT_EQ(a[2].type, "oneof");
  EXPECT_TRUE(a[2].optional);
  ASSERT_EQ(a[2].args.size(), 2u);
  EXPECT_EQ(a[2].args[0].type, "pure-token");
  EXPECT_EQ(a[2].args[0].token, "NX");
  ASSERT_EQ(a[3].args.size(), 2u);
  EXPECT_EQ(a[3].args[0].type, "block");
  ASSERT_EQ(a[3].args[0].args.size(), 2u);
  EXPECT_EQ(a[3].args[0].args[1].type, "integer");
  EXPECT_EQ(a[3].args[1].token, "KEEPTTL");
  EXPECT_TRUE(a[4].optional);
  EXPECT_TRUE(a[4].multiple);
  EXPECT_EQ(a[4].type, "integer");
}

TEST(DocSyntax, MalformedInputNeverCrashes) {
  for (std::string_view s : {"", "[", "]", "(", "a | | b", "[a (b | ]", "...", "x ... ..."})
    ParseDocSyntax(s);
  EXPECT_TRUE(ParseDocSyntax("").empty());
}

TEST(DocSyntax, EveryRowIsDocumentedAndParses) {
  for (const CommandSpec& s : AllCommands()) {
    ASSERT_NE(s.group, nullptr) << s.name;
    ASSERT_NE(s.since, nullptr) << s.name;
    ASSERT_NE(s.syntax, nullptr) << s.name;
    ParseDocSyntax(s.syntax);
    std::set<std::string_view> subs;
    for (const SubcommandDoc& d : s.subcommands) {
      ASSERT_NE(d.since, nullptr) << s.name << "|" << d.name;
      ASSERT_NE(d.syntax, nullptr) << s.name << "|" << d.name;
      ASSERT_NE(d.summary, nullptr) << s.name << "|" << d.name;
      EXPECT_TRUE(subs.insert(d.name).second) << s.name << "|" << d.name;  // each once
      for (const char* c = d.name; *c != 0; ++c) EXPECT_FALSE(*c >= 'a' && *c <= 'z') << d.name;
      ParseDocSyntax(d.syntax);
    }
  }
}

TEST(CommandTable, SubcommandsGetTheirOwnStatSlots) {
  CommandTable t(AllCommands());
  const CommandSpec* client = t.Find("client");
  ASSERT_NE(client, nullptr);
  std::vector<std::string_view> args = {"CLIENT", "list"};
  EXPECT_EQ(t.stat_name(t.StatIndex(client, args)), "client|list");
  args = {"client", "nosuch"};
  EXPECT_EQ(t.stat_name(t.StatIndex(client, args)), "client");
  const CommandSpec* ping = t.Find("PING");
  args = {"ping", "list"};
  EXPECT_EQ(t.stat_name(t.StatIndex(ping, args)), "ping");
}

TEST(CommandTable, FindsEveryCommandInAnyCaseAndNothingElse) {
  CommandTable t(AllCommands());
  for (const CommandSpec& spec : t.specs()) {
    std::string upper = spec.name, lower = ToLower(spec.name), mixed = lower;
    for (size_t i = 0; i < mixed.size(); i += 2) mixed[i] = upper[i];
    EXPECT_EQ(t.Find(upper), &spec) << upper;
    EXPECT_EQ(t.Find(lower), &spec) << upper;
    EXPECT_EQ(t.Find(mixed), &spec) << upper;
    EXPECT_EQ(t.Find(upper + "X"), nullptr) << upper;
    EXPECT_EQ(t.Find(upper.substr(0, upper.size() - 1)), nullptr) << upper;
  }
  EXPECT_EQ(t.Find(""), nullptr);
  EXPECT_EQ(t.Find("NOSUCHCOMMAND"), nullptr);
  EXPECT_EQ(t.Find(std::string(CommandTable::kMaxName + 1, 'A')), nullptr);
  EXPECT_EQ(t.Find(std::string("GE\0T", 4)), nullptr);
}

TEST(CommandStats, BucketsCountsAndErrors) {
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(1), 0u);
  EXPECT_EQ(LatencyBucket(2), 1u);
  EXPECT_EQ(LatencyBucket(3), 2u);
  EXPECT_EQ(LatencyBucket(1024), 10u);
  EXPECT_EQ(LatencyBucket(1025), 11u);
  EXPECT_EQ(LatencyBucket(UINT64_MAX), kLatencyBuckets - 1);
  CommandStats s(3);
  s.Record(1, 5, false, true);
  s.Record(1, 7, true, false);
  s.Reject(2);
  for (size_t i = 0; i < CommandStats::kMaxErrorCodes + 10; ++i)
    s.CountError("E" + std::to_string(i));
  s.CountError("E0");
  std::vector<CommandCounters> out(3);
  s.AddTo(&out);
  EXPECT_EQ(out[1].calls, 2u);
  EXPECT_EQ(out[1].usec, 12u);
  EXPECT_EQ(out[1].failed, 1u);
  EXPECT_EQ(out[1].hist[LatencyBucket(5)], 2u);
  EXPECT_EQ(out[2].rejected, 1u);
  std::map<std::string, uint64_t> errs;
  s.AddErrorsTo(&errs);
  EXPECT_EQ(errs.size(), CommandStats::kMaxErrorCodes);  // bounded
  EXPECT_EQ(errs["E0"], 2u);
  s.Reset();
  std::vector<CommandCounters> zero(3);
  s.AddTo(&zero);
  EXPECT_EQ(zero[1].calls, 0u);
}

TEST(CommandStats, TrackedLatencyBucketsAndPercentiles) {
  // Exact up to 16 us, then 8 buckets per power of two, each power of two
  // the upper end of one.
  for (uint64_t us = 0; us <= 16; ++us) EXPECT_EQ(TrackBucketHighUs(TrackBucket(us)), us);
  EXPECT_EQ(TrackBucket(17), 17u);
  EXPECT_EQ(TrackBucket(18), 17u);
  EXPECT_EQ(TrackBucketHighUs(17), 18u);
  EXPECT_EQ(TrackBucketHighUs(TrackBucket(1000)), 1024u);  // (960, 1024]
  EXPECT_EQ(TrackBucketHighUs(TrackBucket(960)), 960u);
  for (size_t i = 4; i <= 30; ++i) {
    EXPECT_EQ(TrackBucketHighUs(TrackBucket(uint64_t{1} << i)), uint64_t{1} << i) << i;
    if (i < 30) {
      EXPECT_GT(TrackBucket((uint64_t{1} << i) + 1), TrackBucket(uint64_t{1} << i)) << i;
    }
  }
  EXPECT_EQ(TrackBucket(UINT64_MAX), kTrackBuckets - 1);
  EXPECT_EQ(TrackBucket(1ull << 30), kTrackBuckets - 1);
  EXPECT_EQ(TrackBucket((1ull << 30) + 1), kTrackBuckets - 1);
  for (uint64_t us = 16; us < (1u << 20); us = us * 3 / 2 + 1) {
    const uint64_t hi = TrackBucketHighUs(TrackBucket(us));
    EXPECT_GE(hi, us);
    EXPECT_LE(hi - us, us / 8) << us;  // within 12.5%
  }
  TrackHist h{};
  EXPECT_EQ(TrackPercentileUs(h, 50), 0u);
  for (int i = 0; i < 98; ++i) ++h[TrackBucket(3)];
  ++h[TrackBucket(10)];
  ++h[TrackBucket(1000)];
  EXPECT_EQ(TrackPercentileUs(h, 0), 3u);
  EXPECT_EQ(TrackPercentileUs(h, 50), 3u);
  EXPECT_EQ(TrackPercentileUs(h, 98), 3u);
  EXPECT_EQ(TrackPercentileUs(h, 99), 10u);
  EXPECT_EQ(TrackPercentileUs(h, 99.9), 1024u);
  EXPECT_EQ(TrackPercentileUs(h, 100), 1024u);

  CommandStats s(2);
  s.Record(1, 5, false, true);
  s.Record(1, 9, false, false);  // latency-tracking off
  std::vector<TrackHist> out(2);
  EXPECT_TRUE(s.AddTrackedTo(&out));
  EXPECT_EQ(out[1][TrackBucket(5)], 1u);
  EXPECT_EQ(out[1][TrackBucket(9)], 0u);
  s.Reset();
  std::vector<TrackHist> zero(2);
  EXPECT_FALSE(s.AddTrackedTo(&zero));
}

TEST(SlowLog, TruncatesKeepsNewestFirstAndTrims) {
  SlowLog log;
  std::string big(200, 'x');
  std::vector<std::string_view> args(40, "a");
  args[1] = big;
  log.Add(args, 10, "1.2.3.4:5", "n", 3);
  log.Add(std::vector<std::string_view>{"PING"}, 20, "1.2.3.4:5", "", 3);
  std::vector<SlowLogEntry> got = log.Get(10);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].usec, 20u);
  EXPECT_EQ(got[1].id, 0u);
  ASSERT_EQ(got[1].args.size(), SlowLog::kMaxArgs);
  EXPECT_EQ(got[1].args[1], std::string(128, 'x') + "... (72 more bytes)");
  EXPECT_EQ(got[1].args.back(), "... (9 more arguments)");
  for (int i = 0; i < 5; ++i) log.Add(std::vector<std::string_view>{"X"}, 1, "", "", 3);
  EXPECT_EQ(log.Len(), 3u);
  log.Trim(1);
  EXPECT_EQ(log.Len(), 1u);
  log.Reset();
  EXPECT_EQ(log.Len(), 0u);
}

TEST(LatencyMonitor, LatestMaxHistoryReset) {
  LatencyMonitor m;
  m.Add("command", 5);
  m.Add("command", 9);  // same second: one sample, the larger
  m.Add("fast-command", 2);
  std::vector<LatencyEventInfo> l = m.Latest();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].event, "command");
  EXPECT_EQ(l[0].max_ms, 9u);
  EXPECT_EQ(l[0].latest.ms, 9u);
  std::vector<LatencySample> h = m.History("command");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].ms, 9u);
  EXPECT_TRUE(m.History("nosuch").empty());
  EXPECT_EQ(m.Reset({"command", "nosuch"}), 1u);
  EXPECT_EQ(m.Reset({}), 1u);
  EXPECT_TRUE(m.Latest().empty());
}

// Observability with a recording MONITOR sink: the thresholds of the config
// decide what reaches the slow log and the latency monitor; a monitor gets
// every other client's command (AUTH redacted), never its own or an admin one.
struct Recorded {
  int worker;
  uint64_t id;
  std::string line;
};

class ObservabilityTest : public ::testing::Test {
 protected:
  ObservabilityTest()
      : obs_(
            [this](int w, uint64_t id, const std::shared_ptr<const std::string>& line) {
              seen_.push_back({w, id, *line});
            },
            [](const ClientInfo& c) { return "name-" + std::to_string(c.id); }) {}
  void Run(std::vector<std::string_view> args, uint64_t usec, const ClientInfo& c,
           uint32_t flags = 0) {
    CommandSpec spec{};
    spec.name = "X";
    spec.flags = flags;
    obs_.AfterCommand(args, spec, usec, c);
  }
  static void Client(ClientInfo* c, uint64_t id, int worker) {
    c->id = id;
    c->worker = worker;
    c->addr = "127.0.0.1:" + std::to_string(40000 + id);
  }
  std::vector<Recorded> seen_;
  Observability obs_;
};

TEST_F(ObservabilityTest, ThresholdsOfTheConfigDecideTheSlowLogAndLatencyMonitor) {
  Config c;
  c.slowlog_log_slower_than = 1000;
  c.slowlog_max_len = 2;
  c.latency_monitor_threshold = 5;  // ms
  obs_.Apply(c);
  ClientInfo a;
  Client(&a, 7, 0);
  Run({"GET", "k"}, 999, a);  // under both thresholds: nothing
  EXPECT_EQ(obs_.slowlog().Len(), 0u);
  EXPECT_TRUE(obs_.latency().Latest().empty());
  Run({"GET", "k"}, 1000, a);  // the slow log's threshold is inclusive
  ASSERT_EQ(obs_.slowlog().Len(), 1u);
  SlowLogEntry e = obs_.slowlog().Get(1)[0];
  EXPECT_EQ(e.usec, 1000u);
  EXPECT_EQ(e.addr, a.addr);
  EXPECT_EQ(e.name, "name-7");
  EXPECT_EQ(e.args, (std::vector<std::string>{"GET", "k"}));
  EXPECT_TRUE(obs_.latency().Latest().empty());
  Run({"SET", "k", "v"}, 6000, a, kCmdFast);
  ASSERT_EQ(obs_.latency().Latest().size(), 1u);
  EXPECT_EQ(obs_.latency().Latest()[0].event, "fast-command");
  EXPECT_EQ(obs_.latency().Latest()[0].max_ms, 6u);
  Run({"KEYS", "*"}, 7000, a);
  EXPECT_EQ(obs_.slowlog().Len(), 2u);  // slowlog-max-len
  // A shorter slowlog-max-len trims at once; -1 turns the slow log off.
  c.slowlog_max_len = 1;
  c.slowlog_log_slower_than = -1;
  obs_.Apply(c);
  EXPECT_EQ(obs_.slowlog().Len(), 1u);
  Run({"KEYS", "*"}, 9000000, a);
  EXPECT_EQ(obs_.slowlog().Len(), 1u);
  EXPECT_TRUE(seen_.empty());  // nobody monitors
}

TEST_F(ObservabilityTest, MonitorsGetOtherClientsCommandsRedacted) {
  Config c;
  c.slowlog_log_slower_than = -1;
  obs_.Apply(c);
  ClientInfo mon, a;
  Client(&mon, 1, 1);
  Client(&a, 2, 0);
  obs_.AddMonitor(&mon);
  obs_.AddMonitor(&mon);  // twice: one entry
  EXPECT_TRUE(mon.monitor.load());
  Run({"SET", "k", "v"}, 1, a);
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].worker, 1);
  EXPECT_EQ(seen_[0].id, 1u);
  EXPECT_NE(seen_[0].line.find(" [0 127.0.0.1:40002] \"SET\" \"k\" \"v\"\r\n"), std::string::npos)
      << seen_[0].line;
  EXPECT_EQ(seen_[0].line[0], '+');
  Run({"AUTH", "alice", "secret"}, 1, a);
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(seen_[1].line.find("secret"), std::string::npos) << seen_[1].line;
  EXPECT_NE(seen_[1].line.find("\"(redacted)\""), std::string::npos);
  Run({"CONFIG", "SET", "x", "y"}, 1, a, kCmdAdmin);  // admin commands are not shown
  Run({"GET", "k"}, 1, mon);                          // nor a monitor's own
  EXPECT_EQ(seen_.size(), 2u);
  std::string big(10000, 'z');
  Run({"SET", "k", big}, 1, a);  // a long argument is cut
  ASSERT_EQ(seen_.size(), 3u);
  EXPECT_NE(seen_[2].line.find("... (5904 more bytes)"), std::string::npos);
  obs_.RemoveMonitor(&mon);
  Run({"SET", "k", "v"}, 1, a);
  EXPECT_EQ(seen_.size(), 3u);
}

TEST_F(ObservabilityTest, RatesAreTheMeanOfTheIntervals) {
  EXPECT_EQ(obs_.instantaneous_ops(), 0u);
  obs_.SampleRates(1'000'000, 0, 0, 0);
  obs_.SampleRates(1'100'000, 100, 10240, 20480);  // 1,000 ops/s, 100 KiB/s in, 200 out
  EXPECT_EQ(obs_.instantaneous_ops(), 1000u);
  EXPECT_DOUBLE_EQ(obs_.instantaneous_input_kbps(), 100.0);
  EXPECT_DOUBLE_EQ(obs_.instantaneous_output_kbps(), 200.0);
  obs_.SampleRates(1'200'000, 400, 10240, 20480);  // 3,000 ops/s: the mean is 2,000
  EXPECT_EQ(obs_.instantaneous_ops(), 2000u);
  EXPECT_DOUBLE_EQ(obs_.instantaneous_input_kbps(), 50.0);
  obs_.SampleRates(1'300'000, 0, 0, 0);  // CONFIG RESETSTAT: an interval of nothing
  EXPECT_EQ(obs_.instantaneous_ops(), 1333u);
}

}  // namespace
}  // namespace pion::server
