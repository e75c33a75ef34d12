// The server family in process: COMMAND, CONFIG, DBSIZE, FLUSHALL, SHUTDOWN's
// refusals, TIME.
#include <cstdlib>

#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class AdminCommands : public CommandTest {};

TEST_F(AdminCommands, CommandIntrospection) {
  RespValue count = Run({"COMMAND", "COUNT"});
  ASSERT_EQ(count.type, RespValue::Type::kInteger);
  EXPECT_EQ(static_cast<size_t>(count.integer), server().commands().specs().size());
  // LIST names subcommands too ("client|list"), as Redis 7; COUNT does not.
  RespValue list = Run({"COMMAND", "LIST"});
  EXPECT_EQ(list.size(), server().commands().num_stat_names());
  EXPECT_GT(list.size(), static_cast<size_t>(count.integer));
  RespValue info = Run({"COMMAND", "INFO", "ping", "nope"});
  ASSERT_EQ(info.size(), 2u);
  EXPECT_EQ(info[0][0], "ping");
  EXPECT_TRUE(info[0][1].is_integer(-1));  // arity
  EXPECT_EQ(info[1].type, RespValue::Type::kNull);
  RespValue docs = Run({"COMMAND", "DOCS", "PING"});
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], "ping");
  EXPECT_EQ(Run({"COMMAND", "NOPE"}).error(), "ERR unknown subcommand 'NOPE'. Try COMMAND HELP.");
}

TEST_F(AdminCommands, ConfigGetGlobsAndCompatNames) {
  RespValue r = Run({"CONFIG", "GET", "maxmemory*"});
  ASSERT_NE(r.Find("maxmemory"), nullptr) << r.Debug();
  EXPECT_EQ(*r.Find("maxmemory"), "0");
  EXPECT_EQ(*r.Find("maxmemory-clients"), std::to_string(2ull << 30));
  EXPECT_EQ(*r.Find("maxmemory-policy"), "allkeys-lru");
  EXPECT_EQ(*Run({"CONFIG", "GET", "PORT"}).Find("port"), "1974");
  EXPECT_EQ(Run({"CONFIG", "GET", "nothing-like-this"}).size(), 0u);
  // Every table option is there once with "*", except the hidden ones, which
  // answer only to their exact name (as Redis's key-load-delay).
  r = Run({"CONFIG", "GET", "*"});
  for (const ConfigOption& o : ConfigOptions())
    EXPECT_EQ(r.Find(o.name) != nullptr, !o.hidden) << o.name;
  EXPECT_EQ(r.Find("key-load-delay"), nullptr);
  EXPECT_EQ(Run({"CONFIG", "GET", "key-load-*"}).size(), 0u);
  EXPECT_EQ(*Run({"CONFIG", "GET", "KEY-LOAD-DELAY"}).Find("key-load-delay"), "0");
}

TEST_F(AdminCommands, ConfigSetAppliesAllOrNothing) {
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout", "30", "maxclients", "50"}), "OK");
  EXPECT_EQ(server().settings().timeout_s(), 30u);
  EXPECT_EQ(server().settings().maxclients(), 50u);
  EXPECT_EQ(*Run({"CONFIG", "GET", "timeout"}).Find("timeout"), "30");
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout", "5", "maxclients", "0"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - invalid value "
            "'0' for 'maxclients': expected an integer from 1 to 1000000");
  EXPECT_EQ(server().settings().timeout_s(), 30u);  // the valid half was not applied
  EXPECT_EQ(Run({"CONFIG", "SET", "bind", "0.0.0.0"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'bind') - can't set immutable "
            "config");
  // No listener to move here (the fixture's server listens nowhere): the port
  // cannot be changed, and nothing of the same CONFIG SET is applied.
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout", "7", "port", "1"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on "
            "this port");
  EXPECT_EQ(server().settings().timeout_s(), 30u);
  EXPECT_EQ(Run({"CONFIG", "SET", "nope", "1"}).error(),
            "ERR Unknown option or number of args for CONFIG SET - 'nope'");
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout", "1", "TIMEOUT", "2"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter");
  EXPECT_EQ(Run({"CONFIG", "SET", "timeout"}).error(),
            "ERR wrong number of arguments for 'config|set' command");
  EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit", "normal 2mb 1mb 10"}), "OK");
  EXPECT_EQ(server().settings().output_limit(), 2ull << 20);
  EXPECT_EQ(server().settings().output_soft_limit(), 1ull << 20);
  EXPECT_EQ(server().settings().output_soft_seconds(), 10u);
  // Redis 7.0's text for a percentage over 100; the valid maxmemory beside it stays unset.
  const std::string maxmemory = Run({"CONFIG", "GET", "maxmemory"}).Find("maxmemory")->str;
  EXPECT_EQ(Run({"CONFIG", "SET", "maxmemory", "10000001", "maxmemory-clients", "200%"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - "
            "percentage argument must be less or equal to 100");
  EXPECT_EQ(*Run({"CONFIG", "GET", "maxmemory"}).Find("maxmemory"), maxmemory);
  EXPECT_EQ(Run({"CONFIG", "SET", "maxmemory-clients", "x%"}).error(),
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - invalid "
            "value 'x%' for 'maxmemory-clients': expected 0 (no limit), a byte size, or a "
            "percentage of maxmemory up to 100%");
  // The class form's mistakes, in Redis 7.0's words; nothing changes.
  const std::string prefix =
      "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - ";
  EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit", "wrong number"}).error(),
            prefix + "Wrong number of arguments in buffer limit configuration.");
  EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit", "master 10mb 10mb 60"}).error(),
            prefix + "Invalid client class specified in buffer limit configuration.");
  for (const char* bad : {"normal 10mbs 10mb 60", "replica 10mb 10mbs 60", "pubsub 1mb 1mb 60s"})
    EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit", bad}).error(),
              prefix + "Error in hard, soft or soft_seconds setting in buffer limit configuration.")
        << bad;
  EXPECT_EQ(server().settings().output_limit(), 2ull << 20);
  EXPECT_EQ(Run({"CONFIG", "REWRITE"}).error(),
            "ERR CONFIG REWRITE is not supported: edit the config file");
  EXPECT_EQ(Run({"CONFIG", "RESETSTAT"}), "OK");
}

TEST_F(AdminCommands, DbSizeFlushAllTimeWithoutStore) {
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
  EXPECT_EQ(Run({"FLUSHALL", "ASYNC"}), "OK");
  EXPECT_EQ(Run({"FLUSHALL", "LATER"}).error(), "ERR syntax error");
  RespValue t = Run({"TIME"});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GT(std::strtoull(t[0].str.c_str(), nullptr, 10), 1600000000ull);
  EXPECT_LT(std::strtoull(t[1].str.c_str(), nullptr, 10), 1000000ull);
}

TEST_F(AdminCommands, ShutdownRefusals) {
  EXPECT_EQ(Run({"SHUTDOWN", "ABORT"}).error(), "ERR No shutdown in progress.");
  EXPECT_EQ(Run({"SHUTDOWN", "SAVE", "NOSAVE"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"SHUTDOWN", "LATER"}).error(), "ERR syntax error");
  EXPECT_FALSE(client().reading_stopped());
}

class AdminKvCommands : public KvTest {};

TEST_F(AdminKvCommands, DbSizeCountsNamespacesAndFlushAllEmpties) {
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "a", "32", "fp16"}), "OK");
  EXPECT_EQ(Run({"KV.PREFIX.REGISTER", "b", "32", "fp16"}), "OK");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(2));
  EXPECT_EQ(Run({"FLUSHALL"}), "OK");
  EXPECT_TRUE(Run({"DBSIZE"}).is_integer(0));
}

}  // namespace
}  // namespace pion::server::testing
