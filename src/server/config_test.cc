// ParseConfig / ApplySetting: flags, config file, errors naming the option;
// RuntimeSettings, what the workers read of a config.
#include "server/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "server/runtime_settings.h"

namespace pion::server {
namespace {

Result<Config> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "pion-server");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseConfig(static_cast<int>(argv.size()), argv.data());
}

TEST(Config, Defaults) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 1974);
  EXPECT_EQ(c->bind, "127.0.0.1");
  EXPECT_FALSE(c->kvcache);
  EXPECT_EQ(c->appendfsync, FsyncPolicy::kEverySec);
  EXPECT_EQ(c->proto_max_bulk_len, 1ull << 30);
  EXPECT_EQ(c->client_query_buffer_limit, 2ull << 30);
}

TEST(Config, Flags) {
  auto c = Parse({"--port",
                  "7000",
                  "--bind",
                  "0.0.0.0",
                  "--kvcache",
                  "-w",
                  "4",
                  "--maxmemory",
                  "2gb",
                  "--appendfsync",
                  "always",
                  "--requirepass",
                  "s3cret",
                  "--loglevel",
                  "warning",
                  "--timeout",
                  "30",
                  "--maxclients",
                  "50",
                  "--proto-max-bulk-len",
                  "512mb",
                  "--client-output-buffer-limit",
                  "16mb",
                  "--wal-repair",
                  "--max-sessions=100"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->port, 7000);
  EXPECT_EQ(c->bind, "0.0.0.0");
  EXPECT_TRUE(c->kvcache);
  EXPECT_EQ(c->workers, 4);
  EXPECT_EQ(c->maxmemory, 2ull << 30);
  EXPECT_EQ(c->appendfsync, FsyncPolicy::kAlways);
  EXPECT_EQ(c->requirepass, "s3cret");
  EXPECT_EQ(c->loglevel, LogLevel::kWarning);
  EXPECT_EQ(c->timeout, 30u);
  EXPECT_EQ(c->maxclients, 50u);
  EXPECT_EQ(c->proto_max_bulk_len, 512ull << 20);
  EXPECT_EQ(c->client_output_buffer_limit, 16ull << 20);
  EXPECT_TRUE(c->wal_repair);
  EXPECT_EQ(c->max_sessions, 100u);
}

TEST(Config, FlagWithExplicitBool) {
  auto c = Parse({"--kvcache", "no", "--port", "1"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->kvcache);
  EXPECT_EQ(c->port, 1);
}

TEST(Config, AutoSaveRetry) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->auto_save_retry_min, 1u);
  EXPECT_EQ(c->auto_save_retry_max, 300u);
  c = Parse({"--auto-save-retry-min", "5", "--auto-save-retry-max", "60"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->auto_save_retry_min, 5u);
  EXPECT_EQ(c->auto_save_retry_max, 60u);
  c = Parse({"--auto-save-retry-min", "0"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("auto-save-retry-min"), std::string_view::npos);
  EXPECT_FALSE(Parse({"--auto-save-retry-max", "86401"}).ok());
}

// wal-preallocate-bytes: 64 MiB by default, a size or 0 (off).
TEST(Config, WalPreallocateBytes) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->wal_preallocate_bytes, 64ull << 20);
  c = Parse({"--wal-preallocate-bytes", "16mb"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->wal_preallocate_bytes, 16ull << 20);
  c = Parse({"--wal-preallocate-bytes", "0"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->wal_preallocate_bytes, 0u);
  c = Parse({"--wal-preallocate-bytes", "lots"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("wal-preallocate-bytes"), std::string_view::npos);
}

TEST(Config, ErrorsNameTheOption) {
  auto c = Parse({"--maxmemory", "lots"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("maxmemory"), std::string_view::npos);
  EXPECT_NE(c.status().message().find("lots"), std::string_view::npos);
  c = Parse({"--port", "70000"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("port"), std::string_view::npos);
  c = Parse({"--workers", "65"});
  EXPECT_FALSE(c.ok());
  c = Parse({"--appendfsync", "sometimes"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("always, everysec or no"), std::string_view::npos);
  c = Parse({"--nope", "1"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--nope"), std::string_view::npos);
  c = Parse({"--port"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("needs a value"), std::string_view::npos);
  c = Parse({"--loglevel", "loud"});
  EXPECT_FALSE(c.ok());
}

TEST(Config, HelpAndVersion) {
  EXPECT_TRUE(Parse({"--help"})->show_help);
  EXPECT_TRUE(Parse({"--version"})->show_version);
  EXPECT_NE(ConfigUsage().find("--maxmemory"), std::string::npos);
}

TEST(Config, FileThenFlags) {
  char path[] = "/tmp/pion-config-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "# comment\n\nport 6000\nmaxmemory 100mb\n  kvcache yes\nrequirepass \"a b\"\n"
         "client-output-buffer-limit normal 1mb 0 0\n";
  }
  auto c = Parse({path, "--port", "6001"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->port, 6001);
  EXPECT_EQ(c->maxmemory, 100ull << 20);
  EXPECT_TRUE(c->kvcache);
  EXPECT_EQ(c->requirepass, "a b");
  EXPECT_EQ(c->client_output_buffer_limit, 1ull << 20);
  EXPECT_EQ(c->config_file, path);
  {
    std::ofstream f(path);
    f << "port 6000\nmaxmemory huge\n";
  }
  c = Parse({path});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":2:"), std::string_view::npos);
  EXPECT_NE(c.status().message().find("maxmemory"), std::string_view::npos);
  std::remove(path);
  EXPECT_FALSE(Parse({"/nonexistent/pion.conf"}).ok());
}

TEST(Config, OptionTable) {
  for (const ConfigOption& o : ConfigOptions()) {
    Config c;
    EXPECT_TRUE(FindConfigOption(o.name) != nullptr);
    // Every value CONFIG GET prints parses back.
    std::string v = o.get(c);
    if (std::string(o.name) == "requirepass" || std::string(o.name) == "logfile") continue;
    EXPECT_TRUE(ApplySetting(&c, o.name, {v}).ok()) << o.name << "=" << v;
  }
  EXPECT_NE(FindConfigOption("MAXMEMORY"), nullptr);
  EXPECT_EQ(FindConfigOption("nope"), nullptr);
}

TEST(RuntimeSettings, PublishesTheConfigsRunTimeValues) {
  Config c;
  c.maxclients = 77;
  c.timeout = 9;
  c.client_output_buffer_limit = 4 << 20;
  c.client_output_buffer_soft_limit = 2 << 20;
  c.client_output_buffer_soft_seconds = 5;
  c.pubsub_output_buffer_limit = 8 << 20;
  c.pubsub_output_buffer_soft_limit = 1 << 20;
  c.pubsub_output_buffer_soft_seconds = 60;
  c.client_query_buffer_limit = 3 << 20;
  c.maxmemory = 1 << 30;
  c.maxmemory_clients = 0;
  c.maxmemory_clients_percent = 10;
  RuntimeSettings s;
  s.Publish(c);
  EXPECT_EQ(s.maxclients(), 77u);
  EXPECT_EQ(s.timeout_s(), 9u);
  EXPECT_EQ(s.output_limit(), 4u << 20);
  EXPECT_EQ(s.output_soft_limit(), 2u << 20);
  EXPECT_EQ(s.output_soft_seconds(), 5u);
  EXPECT_EQ(s.pubsub_output_limits().hard, 8u << 20);
  EXPECT_EQ(s.pubsub_output_limits().soft, 1u << 20);
  EXPECT_EQ(s.pubsub_output_limits().soft_seconds, 60u);
  EXPECT_EQ(s.query_buffer_limit(), 3u << 20);
  EXPECT_EQ(s.maxmemory(), 1u << 30);
  EXPECT_EQ(s.maxmemory_clients(), (1u << 30) / 10);  // 10 % of maxmemory
  EXPECT_EQ(s.output_check_threshold(), 1u << 20);    // the least nonzero limit
  // No limits at all: nothing to check.
  c.client_output_buffer_limit = c.client_output_buffer_soft_limit = 0;
  c.pubsub_output_buffer_limit = c.pubsub_output_buffer_soft_limit = 0;
  s.Publish(c);
  EXPECT_EQ(s.output_check_threshold(), UINT64_MAX);
}

TEST(RuntimeSettings, ClientsMemoryPercentNeedsMaxmemoryAndHasAFloor) {
  Config c;
  c.maxmemory_clients_percent = 50;
  c.maxmemory = 0;
  EXPECT_EQ(EffectiveClientsMemory(c), 0u);  // a share of nothing: no limit
  c.maxmemory = 100 * 1024;
  EXPECT_EQ(EffectiveClientsMemory(c), 128u * 1024);  // 50 KiB raised to the floor
  c.maxmemory_clients_percent = 0;
  c.maxmemory_clients = 1000;
  EXPECT_EQ(EffectiveClientsMemory(c), 128u * 1024);
  c.maxmemory_clients = 0;
  EXPECT_EQ(EffectiveClientsMemory(c), 0u);
  c.maxmemory_clients = 1 << 20;
  EXPECT_EQ(EffectiveClientsMemory(c), 1u << 20);
}

}  // namespace
}  // namespace pion::server
