// The CLIENT family in process: ID, GETNAME/SETNAME, INFO, LIST, KILL, and the
// accepted no-ops.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class ClientCommands : public CommandTest {};

TEST_F(ClientCommands, IdAndNames) {
  EXPECT_TRUE(Run({"CLIENT", "ID"}).is_integer(static_cast<int64_t>(client().info().id)));
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}).type, RespValue::Type::kNull);
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "worker-1"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}), "worker-1");
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "a\nb"}).error(),
            "ERR Client names cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}), "worker-1");  // unchanged
}

TEST_F(ClientCommands, ListHasEveryClientById) {
  SwitchClient(1);
  Run({"CLIENT", "SETNAME", "second"});
  SwitchClient(0);
  RespValue r = Run({"CLIENT", "LIST"});
  ASSERT_EQ(r.type, RespValue::Type::kBulk);
  size_t first = r.str.find("id=1 ");
  size_t second = r.str.find("id=2 ");
  ASSERT_NE(first, std::string::npos) << r.str;
  ASSERT_NE(second, std::string::npos) << r.str;
  EXPECT_LT(first, second);
  EXPECT_NE(r.str.find("name=second"), std::string::npos) << r.str;
  r = Run({"CLIENT", "LIST", "ID", "2"});
  EXPECT_EQ(r.str.find("id=1 "), std::string::npos);
  EXPECT_NE(r.str.find("id=2 "), std::string::npos);
  EXPECT_EQ(Run({"CLIENT", "LIST", "ID", "x"}).error(), "ERR Invalid client ID");
  EXPECT_EQ(Run({"CLIENT", "LIST", "TYPE", "odd"}).error(), "ERR Unknown client type 'odd'");
}

TEST_F(ClientCommands, InfoIsOnlyThisClient) {
  SwitchClient(1);
  RespValue r = Run({"CLIENT", "INFO"});
  EXPECT_EQ(r.str.rfind("id=2 ", 0), 0u) << r.str;
  EXPECT_EQ(r.str.find("id=1 "), std::string::npos);
}

TEST_F(ClientCommands, KillFilters) {
  EXPECT_TRUE(Run({"CLIENT", "KILL", "ID", "1"}).is_integer(0));  // SKIPME yes by default
  EXPECT_FALSE(client().close_requested());
  EXPECT_TRUE(Run({"CLIENT", "KILL", "TYPE", "pubsub"}).is_integer(0));
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", "0"}).error(), "ERR client-id should be greater than 0");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID"}).error(), "ERR No such client");  // old form: an addr
  EXPECT_EQ(Run({"CLIENT", "KILL", "BOGUS", "1"}).error(), "ERR syntax error");
  EXPECT_TRUE(Run({"CLIENT", "KILL", "ID", "1", "SKIPME", "no"}).is_integer(1));
  EXPECT_TRUE(client().close_requested());
}

// CLIENT NO-EVICT keeps a client out of client eviction: flag `e`; RESET clears it.
TEST_F(ClientCommands, NoEvictFlag) {
  EXPECT_NE(Run({"CLIENT", "INFO"}).str.find("flags=N "), std::string::npos);
  EXPECT_EQ(Run({"CLIENT", "NO-EVICT", "ON"}), "OK");
  EXPECT_TRUE(client().info().no_evict.load());
  EXPECT_NE(Run({"CLIENT", "INFO"}).str.find("flags=e "), std::string::npos);
  EXPECT_EQ(Run({"CLIENT", "NO-EVICT", "MAYBE"}).error(), "ERR syntax error");
  EXPECT_TRUE(client().info().no_evict.load());  // nothing changed
  EXPECT_EQ(Run({"RESET"}), "RESET");
  EXPECT_FALSE(client().info().no_evict.load());
  EXPECT_EQ(Run({"CLIENT", "NO-EVICT", "ON"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "NO-EVICT", "off"}), "OK");
  EXPECT_FALSE(client().info().no_evict.load());
}

TEST_F(ClientCommands, AcceptedAndRefusedOptions) {
  EXPECT_EQ(Run({"CLIENT", "SETINFO", "LIB-NAME", "x"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "SETINFO", "COLOR", "x"}).error(), "ERR Unrecognized option 'COLOR'");
  EXPECT_EQ(Run({"CLIENT", "NO-EVICT", "ON"}), "OK");
  EXPECT_EQ(Run({"CLIENT", "REPLY", "ON"}), "OK");
  EXPECT_EQ(client().reply_mode(), net::ReplyMode::kOn);
  Run({"CLIENT", "REPLY", "SKIP"});
  EXPECT_EQ(client().reply_mode(), net::ReplyMode::kSkip);
  Run({"CLIENT", "REPLY", "OFF"});  // the fixture still sees the reply the socket would drop
  EXPECT_EQ(client().reply_mode(), net::ReplyMode::kOff);
  EXPECT_EQ(Run({"CLIENT", "REPLY", "MAYBE"}).error(), "ERR syntax error");
  EXPECT_EQ(Run({"CLIENT", "SETINFO", "LIB-VER", "a b"}).error(),
            "ERR lib-ver cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(Run({"CLIENT", "BOGUS"}).error(), "ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.");
  EXPECT_EQ(Run({"CLIENT", "SETNAME"}).error(),
            "ERR wrong number of arguments for 'client|setname' command");
  EXPECT_EQ(Run({"CLIENT", "HELP"}).type, RespValue::Type::kArray);
}

}  // namespace
}  // namespace pion::server::testing
