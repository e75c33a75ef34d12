// CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO in process: Redis 7.0's
// grammar and error texts, the flags CLIENT LIST shows, and what the tracking
// table remembers and forgets (INFO tracking_*). Delivery of invalidations
// needs workers: tests/integration/test_tracking.py.
#include <string>
#include <vector>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class ClientTrackingTest : public KvTest {
 protected:
  // One INFO field's value.
  std::string InfoValue(std::string_view field) {
    std::string text = Run({"INFO", "everything"}).str;
    std::string needle = std::string(field) + ":";
    size_t p = text.find(needle);
    if (p == std::string::npos) return "";
    size_t e = text.find("\r\n", p);
    return text.substr(p + needle.size(), e - p - needle.size());
  }
  std::string ClientFlagsField() {
    std::string line = Run({"CLIENT", "INFO"}).str;
    size_t p = line.find(" flags=");
    return line.substr(p + 7, line.find(' ', p + 1) - p - 7);
  }
  std::string RedirField() {
    std::string line = Run({"CLIENT", "INFO"}).str;
    size_t p = line.find(" redir=");
    return line.substr(p + 7, line.find(' ', p + 1) - p - 7);
  }
};

TEST_F(ClientTrackingTest, OnOffAndInfo) {
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on"}), "OK");
  EXPECT_EQ(ClientFlagsField(), "t");
  EXPECT_EQ(RedirField(), "0");
  EXPECT_TRUE(Run({"CLIENT", "GETREDIR"}).is_integer(0));
  EXPECT_EQ(InfoValue("tracking_clients"), "1");
  RespValue info = Run({"CLIENT", "TRACKINGINFO"});
  ASSERT_EQ(info.size(), 6u) << info.Debug();
  EXPECT_EQ(info[1].Strings(), std::vector<std::string>{"on"});
  EXPECT_TRUE(info[3].is_integer(0));
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "off"}), "OK");
  EXPECT_EQ(ClientFlagsField(), "N");
  EXPECT_EQ(RedirField(), "-1");
  EXPECT_TRUE(Run({"CLIENT", "GETREDIR"}).is_integer(-1));
  EXPECT_EQ(InfoValue("tracking_clients"), "0");
  // OFF parses (and checks) the options too.
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "off", "bcast"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "maybe"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"CLIENT", "TRACKING"}).error(),
            "ERR wrong number of arguments for 'client|tracking' command");
}

TEST_F(ClientTrackingTest, Errors) {
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "prefix", "a"}).error(),
            "ERR PREFIX option requires BCAST mode to be enabled");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "optin"}).error(),
            "ERR OPTIN and OPTOUT are not compatible with BCAST");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "optin", "optout"}).error(),
            "ERR You can't specify both OPTIN mode and OPTOUT mode");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "redirect", "9999"}).error(),
            "ERR The client ID you want redirect to does not exist");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "redirect", "x"}).error(),
            "ERR value is not an integer or out of range");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "redirect", "1", "redirect", "1"}).error(),
            "ERR A client can only redirect to a single other client");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "nope"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "redirect"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "prefix", "ab", "prefix", "abc"}).error(),
            "ERR Prefix 'ab' overlaps with another provided prefix 'abc'. Prefixes for a single "
            "client must not overlap.");
  EXPECT_EQ(InfoValue("tracking_clients"), "0");  // nothing changed

  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "prefix", "foo"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "prefix", "fo"}).error(),
            "ERR Prefix 'fo' overlaps with an existing prefix 'foo'. Prefixes for a single "
            "client must not overlap.");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on"}).error(),
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, "
            "and then re-enabling it with a different mode.");
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "off"}), "OK");
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "optin"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "TRACKING", "on", "optout"}).error(),
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
            "and then re-enabling it with a different mode.");
}

TEST_F(ClientTrackingTest, Caching) {
  EXPECT_EQ(Run({"CLIENT", "CACHING", "yes"}).error(),
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN "
            "or OPTOUT mode enabled");
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "optin"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "CACHING", "no"}).error(),
            "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
  EXPECT_EQ(Run({"CLIENT", "CACHING", "maybe"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"CLIENT", "CACHING", "yes", "x"}).error(),
            "ERR wrong number of arguments for 'client|caching' command");
  // OPTIN: only the command after CACHING yes is tracked.
  ASSERT_EQ(Run({"SET", "a", "1"}), "OK");
  ASSERT_EQ(Run({"GET", "a"}), "1");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "0");
  ASSERT_EQ(Run({"CLIENT", "CACHING", "yes"}), "OK");
  RespValue info = Run({"CLIENT", "TRACKINGINFO"});
  EXPECT_EQ(info[1].Strings(), (std::vector<std::string>{"on", "optin", "caching-yes"}));
  ASSERT_EQ(Run({"GET", "a"}), "1");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "1");
  ASSERT_EQ(Run({"SET", "b", "1"}), "OK");
  ASSERT_EQ(Run({"GET", "b"}), "1");  // CACHING applied to one command only
  ASSERT_EQ(Run({"SET", "a", "2"}), "OK");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "0");
  // OPTOUT: every read but the one after CACHING no.
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "off"}), "OK");
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "optout"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "CACHING", "yes"}).error(),
            "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
  ASSERT_EQ(Run({"CLIENT", "CACHING", "no"}), "OK");
  ASSERT_EQ(Run({"GET", "a"}), "2");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "0");
  ASSERT_EQ(Run({"GET", "a"}), "2");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "1");
}

TEST_F(ClientTrackingTest, TableRemembersReadsAndForgetsWrites) {
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on"}), "OK");
  ASSERT_EQ(Run({"MSET", "a", "1", "b", "x", "c", "3"}), "OK");
  ASSERT_EQ(Run({"MGET", "a", "b", "c"}).size(), 3u);
  SwitchClient(1);
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on"}), "OK");
  ASSERT_EQ(Run({"GET", "a"}), "1");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "3");
  EXPECT_EQ(InfoValue("tracking_total_items"), "4");
  EXPECT_EQ(InfoValue("tracking_clients"), "2");
  // A write forgets its keys; a failed one changes nothing.
  ASSERT_TRUE(Run({"DEL", "a"}).is_integer(1));
  EXPECT_EQ(InfoValue("tracking_total_keys"), "2");
  EXPECT_EQ(InfoValue("tracking_total_items"), "2");
  EXPECT_FALSE(Run({"INCR", "b"}).error().empty());  // not an integer
  EXPECT_EQ(InfoValue("tracking_total_keys"), "2");
  // COPY's source is only read.
  ASSERT_TRUE(Run({"COPY", "b", "d"}).is_integer(1));
  EXPECT_EQ(InfoValue("tracking_total_keys"), "2");
  ASSERT_EQ(Run({"FLUSHALL"}), "OK");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "0");
  EXPECT_EQ(InfoValue("tracking_total_items"), "0");
}

TEST_F(ClientTrackingTest, LoweredTableBoundAppliesAtOnce) {
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on"}), "OK");
  ASSERT_EQ(Run({"MGET", "a", "b", "c"}).size(), 3u);
  EXPECT_EQ(InfoValue("tracking_total_keys"), "3");
  ASSERT_EQ(Run({"CONFIG", "SET", "tracking-table-max-keys", "1"}), "OK");
  EXPECT_EQ(InfoValue("tracking_total_keys"), "1");
}

TEST_F(ClientTrackingTest, TableBound) {
  ASSERT_EQ(Run({"CONFIG", "SET", "tracking-table-max-keys", "2"}), "OK");
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on"}), "OK");
  for (const char* k : {"k1", "k2", "k3", "k4", "k5"}) Run({"GET", k});
  EXPECT_EQ(InfoValue("tracking_total_keys"), "2");
  EXPECT_EQ(InfoValue("tracking_total_items"), "2");
  EXPECT_EQ(Run({"CONFIG", "GET", "tracking-table-max-keys"}).Strings(),
            (std::vector<std::string>{"tracking-table-max-keys", "2"}));
}

TEST_F(ClientTrackingTest, BcastPrefixesAndFlags) {
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "prefix", "b", "prefix", "a", "noloop"}),
            "OK");
  EXPECT_EQ(ClientFlagsField(), "tB");
  RespValue info = Run({"CLIENT", "TRACKINGINFO"});
  EXPECT_EQ(info[1].Strings(), (std::vector<std::string>{"on", "bcast", "noloop"}));
  EXPECT_EQ(info[5].Strings(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(InfoValue("tracking_total_prefixes"), "2");
  // A BCAST client's reads are not remembered.
  Run({"GET", "a1"});
  EXPECT_EQ(InfoValue("tracking_total_keys"), "0");
  // Prefixes add up; memory is charged to the client.
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "bcast", "prefix", "c"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "TRACKINGINFO"})[5].size(), 3u);
  EXPECT_GT(client().info().service_mem.load(), 0u);
  // RESET turns tracking off.
  EXPECT_EQ(Run({"RESET"}), "RESET");
  EXPECT_EQ(ClientFlagsField(), "N");
  EXPECT_EQ(InfoValue("tracking_total_prefixes"), "0");
  EXPECT_EQ(client().info().service_mem.load(), 0u);
}

TEST_F(ClientTrackingTest, RedirectToAnotherClient) {
  SwitchClient(1);
  const std::string other = std::to_string(Run({"CLIENT", "ID"}).integer);
  SwitchClient(0);
  ASSERT_EQ(Run({"CLIENT", "TRACKING", "on", "redirect", other}), "OK");
  EXPECT_EQ(RedirField(), other);
  EXPECT_EQ(Run({"CLIENT", "GETREDIR"}).integer, std::stoll(other));
}

}  // namespace
}  // namespace pion::server::testing
