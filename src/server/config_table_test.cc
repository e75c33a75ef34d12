// The option table against pion.conf, --help and CONFIG SET's validation.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/config.h"

namespace pion::server {
namespace {

// pion.conf's settings: name -> the rest of the line, in file order.
std::vector<std::pair<std::string, std::string>> ConfLines() {
  std::ifstream in(std::string(PION_SOURCE_DIR) + "/pion.conf");
  EXPECT_TRUE(in.good());
  std::vector<std::pair<std::string, std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string name, rest;
    s >> name;
    std::getline(s >> std::ws, rest);
    out.emplace_back(name, rest);
  }
  return out;
}

TEST(ConfigTable, PionConfListsEveryOptionOnceAndNothingElse) {
  std::set<std::string> listed;
  for (const auto& [name, value] : ConfLines()) {
    EXPECT_NE(FindConfigOption(name), nullptr) << "pion.conf sets unknown option " << name;
    EXPECT_TRUE(listed.insert(name).second) << "pion.conf sets " << name << " twice";
  }
  for (const ConfigOption& o : ConfigOptions())
    EXPECT_EQ(listed.count(o.name), 1u) << "pion.conf does not document " << o.name;
  EXPECT_EQ(listed.size(), ConfigOptions().size());
}

TEST(ConfigTable, PionConfShowsTheDefaults) {
  std::string path = std::string(PION_SOURCE_DIR) + "/pion.conf";
  std::vector<char*> argv = {const_cast<char*>("pion-server"), path.data()};
  auto loaded = ParseConfig(2, argv.data());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Config defaults;
  for (const ConfigOption& o : ConfigOptions())
    EXPECT_EQ(o.get(*loaded), o.get(defaults)) << o.name;
}

TEST(ConfigTable, DefaultsComeFromTheTable) {
  Config c;
  EXPECT_EQ(c.maxclients, 10000u);
  EXPECT_EQ(c.dir, ".");
  EXPECT_TRUE(c.protected_mode);
  EXPECT_TRUE(c.appendonly);
  EXPECT_EQ(c.maxmemory_clients, 2ull << 30);
  EXPECT_EQ(c.max_sessions, 256u);
  for (const ConfigOption& o : ConfigOptions()) {
    Config parsed;
    ASSERT_TRUE(ApplySetting(&parsed, o.name, {o.default_value}).ok()) << o.name;
    EXPECT_EQ(o.get(parsed), o.get(c)) << o.name;
  }
}

// The --help line (with its continuation lines) that starts with `start`.
std::string UsageEntry(const std::string& usage, const std::string& start) {
  size_t at = usage.find("\n" + start);
  if (at == std::string::npos) return "";
  size_t end = at + 1;
  do {
    end = usage.find('\n', end + 1);
  } while (end != std::string::npos && usage.compare(end + 1, 4, "    ") == 0);
  std::string entry = usage.substr(at + 1, end - at - 1);
  std::string words;  // whitespace runs folded to one space
  std::istringstream in(entry);
  for (std::string w; in >> w;) words += (words.empty() ? "" : " ") + w;
  return words;
}

TEST(ConfigTable, UsageHasALinePerOption) {
  std::string usage = ConfigUsage();
  for (const ConfigOption& o : ConfigOptions()) {
    std::string flag = (o.short_flag != 0 ? std::string("-") + o.short_flag + ", " : "") + "--" +
                       o.name + (*o.arg != 0 ? " " : "");
    std::string entry = UsageEntry(usage, "  " + flag);
    ASSERT_FALSE(entry.empty()) << o.name;
    EXPECT_NE(entry.find(o.help), std::string::npos) << entry;
    // Flags are off unless given; every other entry names its default.
    EXPECT_EQ(entry.find("(default") != std::string::npos,
              !o.is_flag() && o.name != std::string("requirepass"))
        << entry;
  }
  EXPECT_NE(UsageEntry(usage, "  --port N").find("TCP port (default 1974)"), std::string::npos);
  EXPECT_NE(UsageEntry(usage, "  --client-output-buffer-limit").find("(default normal 0 0 0"),
            std::string::npos);
  EXPECT_NE(UsageEntry(usage, "  --client-output-buffer-limit").find("pubsub 32mb 8mb 60)"),
            std::string::npos);
}

TEST(ConfigTable, ConfigSetValidation) {
  Config next;
  auto e = ApplyConfigSet({{"nope", "1"}}, &next);
  EXPECT_EQ(e.kind, ConfigSetError::kUnknown);
  EXPECT_EQ(e.name, "nope");
  e = ApplyConfigSet({{"bind", "0.0.0.0"}}, &next);
  EXPECT_EQ(e.kind, ConfigSetError::kImmutable);
  e = ApplyConfigSet({{"save", "3600 1 300"}}, &next);
  EXPECT_EQ(e.kind, ConfigSetError::kInvalid);
  EXPECT_EQ(e.detail, "Invalid save parameters");
  e = ApplyConfigSet({{"save", "0 1"}}, &next);  // seconds start at 1
  EXPECT_EQ(e.kind, ConfigSetError::kInvalid);
  next = Config();
  e = ApplyConfigSet({{"save", "3600 1 300 100 60 10000"}}, &next);
  ASSERT_TRUE(e.ok()) << e.detail;
  EXPECT_EQ(FindConfigOption("save")->get(next), "3600 1 300 100 60 10000");
  EXPECT_EQ(next.save_points.size(), 3u);
  e = ApplyConfigSet({{"save", ""}}, &next);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(next.save_points.empty());
  EXPECT_TRUE(FindConfigOption("key-load-delay")->hidden);
  EXPECT_FALSE(FindConfigOption("save")->hidden);
  e = ApplyConfigSet({{"timeout", "1"}, {"TIMEOUT", "2"}}, &next);
  EXPECT_EQ(e.kind, ConfigSetError::kDuplicate);
  e = ApplyConfigSet({{"maxclients", "0"}}, &next);
  EXPECT_EQ(e.kind, ConfigSetError::kInvalid);
  EXPECT_NE(e.detail.find("an integer from 1 to 1000000"), std::string::npos) << e.detail;

  next = Config();
  e = ApplyConfigSet({{"timeout", "9"}, {"client-output-buffer-limit", "normal 2mb 1mb 5"}}, &next);
  ASSERT_TRUE(e.ok());
  Config live;
  live.bind = "10.0.0.1";
  next.bind = "10.0.0.2";  // not runtime: never copied
  CopyRuntimeSettings(next, &live);
  EXPECT_EQ(live.timeout, 9u);
  EXPECT_EQ(live.client_output_buffer_limit, 2ull << 20);
  EXPECT_EQ(live.client_output_buffer_soft_limit, 1ull << 20);
  EXPECT_EQ(live.client_output_buffer_soft_seconds, 5u);
  EXPECT_EQ(live.bind, "10.0.0.1");
}

TEST(ConfigTable, OnlyRuntimeOptionsAreSettable) {
  std::set<std::string> runtime;
  for (const ConfigOption& o : ConfigOptions())
    if (o.runtime) runtime.insert(o.name);
  EXPECT_EQ(runtime, (std::set<std::string>{"port",
                                            "client-query-buffer-limit",
                                            "save",
                                            "key-load-delay",
                                            "maxmemory",
                                            "notify-keyspace-events",
                                            "acl-pubsub-default",
                                            "maxmemory-policy",
                                            "maxmemory-samples",
                                            "lfu-log-factor",
                                            "lfu-decay-time",
                                            "max-block-leases",
                                            "tier-maxbytes",
                                            "tier-min-value",
                                            "appendfsync",
                                            "loglevel",
                                            "timeout",
                                            "maxclients",
                                            "client-output-buffer-limit",
                                            "maxmemory-clients",
                                            "slowlog-log-slower-than",
                                            "slowlog-max-len",
                                            "tracking-table-max-keys",
                                            "latency-monitor-threshold",
                                            "latency-tracking",
                                            "latency-tracking-info-percentiles",
                                            "acllog-max-len",
                                            "tls-cert-file",
                                            "tls-key-file",
                                            "tls-ca-cert-file",
                                            "tls-auth-clients",
                                            "tls-protocols",
                                            "tls-ciphers",
                                            "tls-ciphersuites",
                                            "attend-max-slots",
                                            "attend-maxmemory",
                                            "attend-cold-slots",
                                            "attend-precision",
                                            "attend-pool-min-bytes",
                                            "buffer-recycle-bytes",
                                            "requirepass"}));
}

}  // namespace
}  // namespace pion::server
