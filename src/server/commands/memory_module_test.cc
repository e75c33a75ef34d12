// MEMORY STATS|DOCTOR|MALLOC-STATS|PURGE, MODULE and the CLIENT subcommands
// about blocking and tracking (UNBLOCK, GETREDIR, TRACKINGINFO): Redis 7.0's
// replies, for what pion has (no modules, no blocking commands, no tracking).
#include <algorithm>
#include <string>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class MemoryModuleTest : public KvTest {};

TEST_F(MemoryModuleTest, MemoryStatsHasRedisFieldsAndDb0OnlyWithKeys) {
  RespValue empty = Run({"MEMORY", "STATS"});
  ASSERT_EQ(empty.type, RespValue::Type::kArray) << empty.Debug();  // RESP2: flat pairs
  EXPECT_EQ(empty.size(), 2u * 27);
  EXPECT_EQ(empty.Find("db.0"), nullptr);
  ASSERT_EQ(Run({"SET", "foo", "bar"}), "OK");
  RespValue st = Run({"MEMORY", "STATS"});
  ASSERT_EQ(st.size(), 2u * 28) << st.Debug();
  std::vector<std::string> keys;
  for (size_t i = 0; i < st.size(); i += 2) keys.push_back(st[i].str);
  const std::vector<std::string> want = {"peak.allocated",
                                         "total.allocated",
                                         "startup.allocated",
                                         "replication.backlog",
                                         "clients.slaves",
                                         "clients.normal",
                                         "cluster.links",
                                         "aof.buffer",
                                         "lua.caches",
                                         "functions.caches",
                                         "db.0",
                                         "overhead.total",
                                         "keys.count",
                                         "keys.bytes-per-key",
                                         "dataset.bytes",
                                         "dataset.percentage",
                                         "peak.percentage",
                                         "allocator.allocated",
                                         "allocator.active",
                                         "allocator.resident",
                                         "allocator-fragmentation.ratio",
                                         "allocator-fragmentation.bytes",
                                         "allocator-rss.ratio",
                                         "allocator-rss.bytes",
                                         "rss-overhead.ratio",
                                         "rss-overhead.bytes",
                                         "fragmentation",
                                         "fragmentation.bytes"};
  EXPECT_EQ(keys, want);
  EXPECT_TRUE(st.Find("keys.count")->is_integer(1));
  // db.0 is a map (a flat array in RESP2) of the three hash table overheads.
  const RespValue* db = st.Find("db.0");
  ASSERT_EQ(db->size(), 6u) << db->Debug();
  EXPECT_EQ((*db)[0], "overhead.hashtable.main");
  EXPECT_EQ((*db)[2], "overhead.hashtable.expires");
  EXPECT_EQ((*db)[4], "overhead.hashtable.slot-to-keys");
  // The total is INFO's used_memory; a percentage is a double (a bulk in RESP2).
  const RespValue* total = st.Find("total.allocated");
  ASSERT_EQ(total->type, RespValue::Type::kInteger);
  EXPECT_GT(total->integer, 0);
  EXPECT_EQ(st.Find("peak.percentage")->type, RespValue::Type::kBulk);
  EXPECT_EQ(Run({"MEMORY", "STATS", "x"}).error(),
            "ERR wrong number of arguments for 'memory|stats' command");
}

TEST_F(MemoryModuleTest, MemoryDoctorMallocStatsPurgeAndHelp) {
  // A nearly empty instance gets Redis's "empty" report.
  RespValue doc = Run({"MEMORY", "DOCTOR"});
  EXPECT_EQ(doc.str.rfind("Hi Sam, this instance is empty or is using very little memory", 0), 0u)
      << doc.Debug();
  EXPECT_EQ(Run({"MEMORY", "MALLOC-STATS"}), "Stats not supported for the current allocator");
  EXPECT_EQ(Run({"MEMORY", "PURGE"}), "OK");
  EXPECT_EQ(Run({"MEMORY", "DOCTOR", "x"}).error(),
            "ERR wrong number of arguments for 'memory|doctor' command");
  RespValue help = Run({"MEMORY", "HELP"});
  std::vector<std::string> lines = help.Strings();
  ASSERT_EQ(lines.size(), 14u) << help.Debug();
  EXPECT_EQ(lines[0], "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  EXPECT_EQ(lines[1], "DOCTOR");
  EXPECT_EQ(lines.back(), "    Prints this help.");
  EXPECT_EQ(Run({"MEMORY", "NOSUCH"}).error(), "ERR unknown subcommand 'NOSUCH'. Try MEMORY HELP.");
  // USAGE still works from its new home.
  ASSERT_EQ(Run({"SET", "foo", "bar"}), "OK");
  EXPECT_EQ(Run({"MEMORY", "USAGE", "foo"}).type, RespValue::Type::kInteger);
  EXPECT_EQ(Run({"MEMORY", "USAGE", "nosuch"}).type, RespValue::Type::kNull);
}

TEST_F(MemoryModuleTest, ModuleListIsEmptyAndLoadingFails) {
  RespValue list = Run({"MODULE", "LIST"});
  EXPECT_EQ(list.type, RespValue::Type::kArray);
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(Run({"MODULE", "LOAD", "/some/fake/path"}).error(),
            "ERR Error loading the extension. Please check the server logs.");
  EXPECT_EQ(Run({"MODULE", "LOADEX", "/some/fake/path", "ARGS", "a"}).error(),
            "ERR Error loading the extension. Please check the server logs.");
  EXPECT_EQ(Run({"MODULE", "UNLOAD", "nosuch"}).error(),
            "ERR Error unloading module: no such module with that name");
  EXPECT_EQ(Run({"MODULE", "LIST", "x"}).error(),
            "ERR wrong number of arguments for 'module|list' command");
  EXPECT_EQ(Run({"MODULE", "HELP"}).Strings().front(),
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
}

TEST_F(MemoryModuleTest, ClientUnblockGetredirTrackinginfo) {
  RespValue id = Run({"CLIENT", "ID"});
  const std::string me = std::to_string(id.integer);
  // No client is ever blocked in pion: nothing to unblock.
  EXPECT_TRUE(Run({"CLIENT", "UNBLOCK", me}).is_integer(0));
  EXPECT_TRUE(Run({"CLIENT", "UNBLOCK", me, "ERROR"}).is_integer(0));
  EXPECT_TRUE(Run({"CLIENT", "UNBLOCK", me, "timeout"}).is_integer(0));
  EXPECT_EQ(Run({"CLIENT", "UNBLOCK", me, "later"}).error(),
            "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
  EXPECT_EQ(Run({"CLIENT", "UNBLOCK", "abc"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"CLIENT", "UNBLOCK"}).error(),
            "ERR wrong number of arguments for 'client|unblock' command");
  // Tracking is off until CLIENT TRACKING ON (client_tracking_test.cc).
  EXPECT_TRUE(Run({"CLIENT", "GETREDIR"}).is_integer(-1));
  RespValue info = Run({"CLIENT", "TRACKINGINFO"});
  ASSERT_EQ(info.size(), 6u) << info.Debug();
  EXPECT_EQ(info[0], "flags");
  EXPECT_EQ(info[1].Strings(), std::vector<std::string>{"off"});
  EXPECT_EQ(info[2], "redirect");
  EXPECT_TRUE(info[3].is_integer(-1));
  EXPECT_EQ(info[4], "prefixes");
  EXPECT_EQ(info[5].size(), 0u);
}

TEST_F(MemoryModuleTest, ClientUnblockNeedsAdminAsInRedis) {
  ASSERT_EQ(Run({"ACL", "SETUSER", "u1", "on", "nopass", "+@all", "-@admin"}), "OK");
  ASSERT_EQ(Run({"AUTH", "u1", "x"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "UNBLOCK", "1"}).error().substr(0, 6), "NOPERM");
}

TEST_F(MemoryModuleTest, LolwutDrawsVersion5And6AndOtherwiseTheVersionLine) {
  EXPECT_EQ(Run({"LOLWUT"}), "Redis ver. 7.0.0\n");
  EXPECT_EQ(Run({"LOLWUT", "VERSION", "7", "1", "2"}), "Redis ver. 7.0.0\n");
  // Version 5: Schotter in Braille characters, 6 columns of 3 bytes each per line.
  RespValue five = Run({"LOLWUT", "VERSION", "5", "6", "7", "8"});
  const std::string& art = five.str;
  EXPECT_NE(art.find("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.0\n"),
            std::string::npos)
      << art;
  EXPECT_EQ(art.find('\n'), 6u * 3);
  EXPECT_EQ(art.substr(0, 1), "\xe2");  // U+28xx: a Braille pattern
  // Version 6: a skyline of 10 x 4 colour cells.
  RespValue six = Run({"LOLWUT", "VERSION", "6", "10", "4"});
  EXPECT_NE(six.str.find("Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.0"),
            std::string::npos);
  // Three between the 4 rows, three in the signature.
  EXPECT_EQ(std::count(six.str.begin(), six.str.end(), '\n'), 3 + 3);
  EXPECT_EQ(Run({"LOLWUT", "VERSION", "x"}).error(), "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"LOLWUT", "VERSION", "5", "wide"}).error(),
            "ERR value is not an integer or out of range");
}

TEST_F(MemoryModuleTest, InfoStatsCountsEvictedClientsAfterEvictedKeys) {
  const std::string stats = Run({"INFO", "stats"}).str;
  const size_t keys = stats.find("\r\nevicted_keys:");
  ASSERT_NE(keys, std::string::npos) << stats;
  EXPECT_EQ(stats.find("\r\nevicted_clients:0\r\n"), stats.find("\r\n", keys + 2)) << stats;
}

}  // namespace
}  // namespace pion::server::testing
