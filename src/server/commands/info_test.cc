// INFO in process: section selection, titles and fields a client relies on.
#include <map>
#include <sstream>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

// "# Title" -> {field -> value}.
std::map<std::string, std::map<std::string, std::string>> Sections(const std::string& body) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(body);
  std::string line, current;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.rfind("# ", 0) == 0) {
      current = line.substr(2);
      out[current];
      continue;
    }
    size_t colon = line.find(':');
    if (colon != std::string::npos) out[current][line.substr(0, colon)] = line.substr(colon + 1);
  }
  return out;
}

class InfoCommand : public CommandTest {};

TEST_F(InfoCommand, AllSectionsInOrder) {
  RespValue r = Run({"INFO"});
  ASSERT_EQ(r.type, RespValue::Type::kBulk);
  std::vector<std::string> titles;
  for (size_t p = r.str.find("# "); p != std::string::npos; p = r.str.find("\r\n# ", p + 1))
    titles.push_back(
        r.str.substr(p + (p == 0 ? 2 : 4), r.str.find("\r\n", p + 4) - p - (p == 0 ? 2 : 4)));
  // The default set: everything but Commandstats (as Redis).
  EXPECT_EQ(titles, (std::vector<std::string>{"Server", "Clients", "Memory", "Persistence", "Stats",
                                              "Replication", "CPU", "Errorstats", "Pion", "Cluster",
                                              "Keyspace"}));
  auto s = Sections(r.str);
  EXPECT_EQ(s["Server"]["tcp_port"], "0");  // nothing bound in process
  EXPECT_EQ(s["Server"]["run_id"].size(), 40u);
  EXPECT_EQ(s["Clients"]["connected_clients"], "0");  // no connection took a slot
  EXPECT_TRUE(s["Keyspace"].empty());
  EXPECT_EQ(s["Cluster"]["cluster_enabled"], "0");  // as a non-cluster Redis says
}

TEST_F(InfoCommand, ChosenSectionsOnly) {
  auto s = Sections(Run({"INFO", "clients", "STATS", "nope"}).str);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.count("Clients"));
  EXPECT_TRUE(s.count("Stats"));
  EXPECT_EQ(s["Clients"]["maxclients"], "10000");
  Run({"CONFIG", "SET", "maxmemory-clients", "128mb"});
  EXPECT_EQ(Sections(Run({"INFO", "memory"}).str)["Memory"]["maxmemory_clients"],
            std::to_string(128ull << 20));
  EXPECT_EQ(Sections(Run({"INFO", "nope"}).str).size(), 0u);
  EXPECT_EQ(Sections(Run({"INFO", "everything"}).str).size(), 13u);
  EXPECT_EQ(Sections(Run({"INFO", "all"}).str).size(), 13u);
  // Commands run in process are counted (the spare table: no workers run here).
  auto cs = Sections(Run({"INFO", "commandstats"}).str)["Commandstats"];
  EXPECT_NE(cs["cmdstat_info"].find("calls="), std::string::npos);
  EXPECT_NE(cs["cmdstat_config|set"].find("calls=1,"), std::string::npos);
}

// INFO latencystats (Redis 7.0): one line per command run since the last
// CONFIG RESETSTAT while latency-tracking is on, with the configured percentiles.
TEST_F(InfoCommand, LatencyStatsFollowTrackingAndPercentiles) {
  auto lat = [&] { return Sections(Run({"INFO", "latencystats"}).str)["Latencystats"]; };
  EXPECT_EQ(Run({"CONFIG", "GET", "latency-tracking"}).Find("latency-tracking")->str, "yes");
  EXPECT_EQ(Run({"CONFIG", "GET", "latency-tracking-info-percentiles"})
                .Find("latency-tracking-info-percentiles")
                ->str,
            "50 99 99.9");
  EXPECT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  EXPECT_EQ(lat().count("latency_percentiles_usec_ping"), 0u);  // (CONFIG RESETSTAT counts)
  Run({"PING"});
  Run({"CLIENT", "ID"});
  auto l = lat();
  EXPECT_TRUE(l["latency_percentiles_usec_ping"].starts_with("p50="))
      << l["latency_percentiles_usec_ping"];
  EXPECT_NE(l["latency_percentiles_usec_ping"].find(",p99="), std::string::npos);
  EXPECT_NE(l["latency_percentiles_usec_ping"].find(",p99.9="), std::string::npos);
  EXPECT_EQ(l.count("latency_percentiles_usec_client|id"), 1u);
  EXPECT_EQ(l.count("latency_percentiles_usec_get"), 0u);  // never ran

  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking-info-percentiles", "0.0 50.0 100.0"}), "OK");
  EXPECT_EQ(Run({"CONFIG", "GET", "latency-tracking-info-percentiles"})
                .Find("latency-tracking-info-percentiles")
                ->str,
            "0 50 100");
  const std::string ping = lat()["latency_percentiles_usec_ping"];
  EXPECT_TRUE(ping.starts_with("p0=")) << ping;
  EXPECT_NE(ping.find(",p50="), std::string::npos) << ping;
  EXPECT_NE(ping.find(",p100="), std::string::npos) << ping;
  // Bad lists change nothing (Redis's texts).
  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking-info-percentiles", "10.0 50.0 a"}).error(),
            "ERR CONFIG SET failed (possibly related to argument "
            "'latency-tracking-info-percentiles') - Invalid latency-tracking-info-percentiles "
            "parameters");
  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking-info-percentiles", "10 101"}).error(),
            "ERR CONFIG SET failed (possibly related to argument "
            "'latency-tracking-info-percentiles') - latency-tracking-info-percentiles "
            "parameters should sit between [0.0,100.0]");
  EXPECT_EQ(Run({"CONFIG", "GET", "latency-tracking-info-percentiles"})
                .Find("latency-tracking-info-percentiles")
                ->str,
            "0 50 100");
  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking-info-percentiles", ""}), "OK");
  EXPECT_EQ(lat()["latency_percentiles_usec_ping"], "");

  // Off: nothing is shown and nothing more is counted.
  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking", "no"}), "OK");
  EXPECT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  Run({"PING"});
  EXPECT_TRUE(lat().empty());
  EXPECT_EQ(Run({"CONFIG", "SET", "latency-tracking", "yes"}), "OK");
  auto on = lat();
  EXPECT_EQ(on.count("latency_percentiles_usec_ping"), 0u);  // PING ran untracked
  EXPECT_EQ(on.count("latency_percentiles_usec_config|set"), 1u);
}

// LATENCY HISTOGRAM (Redis 7.0): per command, calls and the cumulative
// counts at powers of two microseconds (RESP2: flat name/value lists).
TEST_F(InfoCommand, LatencyHistogramCumulativeCounts) {
  EXPECT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
  RespValue all = Run({"LATENCY", "HISTOGRAM"});
  ASSERT_EQ(all.size(), 2u) << all.Debug();  // only CONFIG RESETSTAT ran
  EXPECT_EQ(all[0].str, "config|resetstat");
  Run({"PING"});
  Run({"PING"});
  Run({"CLIENT", "ID"});
  Run({"CLIENT", "GETNAME"});
  RespValue r = Run({"LATENCY", "HISTOGRAM", "ping"});
  ASSERT_EQ(r.size(), 2u) << r.Debug();
  EXPECT_EQ(r[0].str, "ping");
  const RespValue& h = r[1];
  ASSERT_EQ(h.size(), 4u) << h.Debug();
  EXPECT_EQ(h[0].str, "calls");
  EXPECT_TRUE(h[1].is_integer(2));
  EXPECT_EQ(h[2].str, "histogram_usec");
  // Bounds are powers of two, counts grow and end at the number of calls.
  const RespValue& points = h[3];
  ASSERT_GE(points.size(), 2u);
  int64_t last = 0;
  for (size_t i = 0; i + 1 < points.size(); i += 2) {
    const int64_t bound = points[i].integer, n = points[i + 1].integer;
    EXPECT_EQ(bound & (bound - 1), 0) << bound;
    EXPECT_GT(n, last);
    last = n;
  }
  EXPECT_EQ(last, 2);
  // A container names its subcommands; a subcommand itself; unknown names skipped.
  RespValue c = Run({"LATENCY", "HISTOGRAM", "client"});
  ASSERT_EQ(c.size(), 4u) << c.Debug();
  EXPECT_EQ(Run({"LATENCY", "HISTOGRAM", "client|id"}).size(), 2u);
  EXPECT_EQ(Run({"LATENCY", "HISTOGRAM", "blabla"}).size(), 0u);
  EXPECT_EQ(Run({"LATENCY", "HISTOGRAM", "blabla", "ping", "get"}).size(), 2u);  // get: no calls
}

class InfoKvCommand : public KvTest {};

TEST_F(InfoKvCommand, KeyspaceAndPionCountNamespaces) {
  Run({"KV.PREFIX.REGISTER", "a", "32", "fp16"});
  auto s = Sections(Run({"INFO", "keyspace", "pion"}).str);
  EXPECT_EQ(s["Keyspace"]["db0"], "keys=1,expires=0,avg_ttl=0");
  EXPECT_EQ(s["Pion"]["vstore_sessions"], "2");  // a namespace's K and V sides
}

}  // namespace
}  // namespace pion::server::testing
