// The connection family in process: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET.
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

class ConnectionCommands : public CommandTest {};

TEST_F(ConnectionCommands, PingAndEcho) {
  EXPECT_EQ(Run({"PING"}), "PONG");
  EXPECT_EQ(last_wire(), "+PONG\r\n");
  EXPECT_EQ(Run({"ping", "hi"}), "hi");
  EXPECT_EQ(last_wire(), "$2\r\nhi\r\n");
  EXPECT_EQ(Run({"ECHO", "x y"}), "x y");
  EXPECT_EQ(Run({"ECHO"}).error(), "ERR wrong number of arguments for 'echo' command");
}

TEST_F(ConnectionCommands, HelloSwitchesProtocolBeforeItsReply) {
  RespValue r = Run({"HELLO", "3"});
  ASSERT_EQ(r.type, RespValue::Type::kMap) << r.Debug();
  EXPECT_EQ(*r.Find("server"), "pion");
  EXPECT_TRUE(r.Find("proto")->is_integer(3));
  EXPECT_TRUE(r.Find("id")->is_integer(static_cast<int64_t>(client().info().id)));
  EXPECT_EQ(client().proto(), 3);
  // RESP2 again: the same fields as a flat array.
  r = Run({"HELLO", "2"});
  ASSERT_EQ(r.type, RespValue::Type::kArray);
  EXPECT_EQ(r.size(), 14u);
  EXPECT_TRUE(r.Find("proto")->is_integer(2));
  EXPECT_EQ(Run({"HELLO", "4"}).error(), "NOPROTO unsupported protocol version");
  EXPECT_EQ(Run({"HELLO", "x"}).error(), "ERR Protocol version is not an integer or out of range");
  EXPECT_EQ(Run({"HELLO", "3", "BOGUS"}).error(), "ERR Syntax error in HELLO option 'BOGUS'");
  EXPECT_EQ(client().proto(), 2);  // refused HELLOs changed nothing
}

TEST_F(ConnectionCommands, HelloSetName) {
  Run({"HELLO", "2", "SETNAME", "app"});
  EXPECT_EQ(server().clients().Name(&client().info()), "app");
  EXPECT_EQ(Run({"HELLO", "2", "SETNAME", "a b"}).error(),
            "ERR Client names cannot contain spaces, newlines or special characters.");
}

TEST_F(ConnectionCommands, AuthWithoutPassword) {
  EXPECT_EQ(Run({"AUTH", "pw"}).error(),
            "ERR AUTH <password> called without any password configured for the default user. "
            "Are you sure your configuration is correct?");
}

TEST_F(ConnectionCommands, SelectOnlyZero) {
  EXPECT_EQ(Run({"SELECT", "0"}), "OK");
  EXPECT_EQ(Run({"SELECT", "1"}).error(), "ERR DB index is out of range");
  EXPECT_EQ(Run({"SELECT", "x"}).error(), "ERR value is not an integer or out of range");
}

TEST_F(ConnectionCommands, QuitClosesAfterTheReply) {
  EXPECT_EQ(Run({"QUIT"}), "OK");
  EXPECT_TRUE(client().close_requested());
}

TEST_F(ConnectionCommands, ResetRestoresProtocolAndName) {
  Run({"HELLO", "3", "SETNAME", "n"});
  EXPECT_EQ(Run({"RESET"}), "RESET");
  EXPECT_EQ(client().proto(), 2);
  EXPECT_EQ(server().clients().Name(&client().info()), "");
  EXPECT_TRUE(client().authenticated());
}

Config WithPassword() {
  Config c;
  c.requirepass = "s3cret";
  return c;
}

class AuthCommands : public CommandTest {
 protected:
  AuthCommands() : CommandTest(WithPassword()) {}
};

TEST_F(AuthCommands, CommandsNeedAuthFirst) {
  EXPECT_FALSE(client().authenticated());
  EXPECT_EQ(Run({"PING"}).error(), "NOAUTH Authentication required.");
  EXPECT_EQ(Run({"AUTH", "wrong"}).error(),
            "WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_FALSE(client().authenticated());
  EXPECT_EQ(Run({"AUTH", "s3cret"}), "OK");
  EXPECT_EQ(Run({"PING"}), "PONG");
  // RESET drops the authentication again.
  EXPECT_EQ(Run({"RESET"}), "RESET");
  EXPECT_FALSE(client().authenticated());
  EXPECT_TRUE(Run({"HELLO", "3"}).is_error());
  EXPECT_EQ(Run({"HELLO", "3", "AUTH", "default", "s3cret"}).type, RespValue::Type::kMap);
  EXPECT_TRUE(client().authenticated());
}

}  // namespace
}  // namespace pion::server::testing
