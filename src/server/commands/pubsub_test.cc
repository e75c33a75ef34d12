// Pub/Sub in process: the subscribe family's confirmations, PUBLISH counts,
// PUBSUB introspection, RESP2 subscribed mode, ACL channel rules, the
// notify-keyspace-events and client-output-buffer-limit settings. Delivery
// across workers needs real connections: tests/integration/test_pubsub.py.
#include "server/commands/testing/command_fixture.h"
#include "server/notify.h"

namespace pion::server::testing {
namespace {

class PubSubCommands : public CommandTest {};

TEST_F(PubSubCommands, SubscribeConfirmsEachChannelWithTheCount) {
  RunMany({"SUBSCRIBE", "a", "b", "a"});
  EXPECT_EQ(last_wire(),
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
            "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n");
  Run({"PSUBSCRIBE", "n*"});
  EXPECT_EQ(last_wire(), "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:3\r\n");
  // Shard channels count apart.
  Run({"SSUBSCRIBE", "s"});
  EXPECT_EQ(last_wire(), "*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n");
  EXPECT_TRUE(client().info().pubsub.load());
  RunMany({"UNSUBSCRIBE", "b", "zz"});
  EXPECT_EQ(last_wire(),
            "*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:2\r\n"
            "*3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:2\r\n");
  Run({"PUNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), "*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:1\r\n");
  // Nothing left of the kind: one reply with a null name.
  Run({"PUNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:1\r\n");
  Run({"SUNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), "*3\r\n$12\r\nsunsubscribe\r\n$1\r\ns\r\n:0\r\n");
  Run({"UNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n");
  EXPECT_FALSE(client().info().pubsub.load());
  EXPECT_EQ(Run({"SUBSCRIBE"}).error(), "ERR wrong number of arguments for 'subscribe' command");
  EXPECT_EQ(Run({"PSUBSCRIBE"}).error(), "ERR wrong number of arguments for 'psubscribe' command");
}

TEST_F(PubSubCommands, Resp3ConfirmationsArePushes) {
  Run({"HELLO", "3"});
  Run({"SUBSCRIBE", "a"});
  EXPECT_EQ(last_wire(), ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
  // Any command runs while subscribed in RESP3.
  EXPECT_EQ(Run({"PING"}), "PONG");
  Run({"UNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), ">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n");
  Run({"UNSUBSCRIBE"});
  EXPECT_EQ(last_wire(), ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
}

TEST_F(PubSubCommands, Resp2SubscribedModeAllowsOnlyTheFamily) {
  Run({"SUBSCRIBE", "a"});
  EXPECT_EQ(Run({"ECHO", "x"}).error(),
            "ERR Can't execute 'echo': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
            "RESET are allowed in this context");
  EXPECT_EQ(Run({"CLIENT", "LIST"}).error(),
            "ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
            "QUIT / RESET are allowed in this context");
  Run({"PING"});
  EXPECT_EQ(last_wire(), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
  Run({"PING", "hi"});
  EXPECT_EQ(last_wire(), "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
  // RESET leaves subscribed mode and drops the subscriptions.
  EXPECT_EQ(Run({"RESET"}), "RESET");
  EXPECT_FALSE(client().info().pubsub.load());
  EXPECT_EQ(Run({"PUBSUB", "NUMSUB", "a"}).size(), 2u);
  EXPECT_TRUE(Run({"PUBSUB", "NUMSUB", "a"})[1].is_integer(0));
  EXPECT_EQ(Run({"PING"}), "PONG");
}

TEST_F(PubSubCommands, PublishCountsReceivers) {
  RunMany({"SUBSCRIBE", "news", "other"});
  RunMany({"PSUBSCRIBE", "n*", "*"});
  SwitchClient(1);
  Run({"SUBSCRIBE", "news"});
  Run({"SSUBSCRIBE", "news"});
  SwitchClient(2);
  EXPECT_TRUE(Run({"PUBLISH", "news", "hi"}).is_integer(4));   // 2 channel + 2 pattern
  EXPECT_TRUE(Run({"PUBLISH", "nope", "hi"}).is_integer(2));   // "n*" and "*"
  EXPECT_TRUE(Run({"SPUBLISH", "news", "hi"}).is_integer(1));  // patterns ignored
  EXPECT_TRUE(Run({"SPUBLISH", "x", "hi"}).is_integer(0));
  EXPECT_EQ(Run({"PUBLISH", "a"}).error(), "ERR wrong number of arguments for 'publish' command");
  // Introspection.
  RespValue ch = Run({"PUBSUB", "CHANNELS"});
  EXPECT_EQ(ch.size(), 2u);
  EXPECT_EQ(Run({"PUBSUB", "CHANNELS", "n*"}).size(), 1u);
  RespValue ns = Run({"PUBSUB", "NUMSUB", "news", "zz"});
  ASSERT_EQ(ns.size(), 4u);
  EXPECT_EQ(ns[0], "news");
  EXPECT_TRUE(ns[1].is_integer(2));
  EXPECT_TRUE(ns[3].is_integer(0));
  EXPECT_EQ(Run({"PUBSUB", "NUMSUB"}).size(), 0u);
  EXPECT_TRUE(Run({"PUBSUB", "NUMPAT"}).is_integer(2));
  EXPECT_EQ(Run({"PUBSUB", "SHARDCHANNELS"}).size(), 1u);
  RespValue sn = Run({"PUBSUB", "SHARDNUMSUB", "news"});
  ASSERT_EQ(sn.size(), 2u);
  EXPECT_TRUE(sn[1].is_integer(1));
  EXPECT_GT(Run({"PUBSUB", "HELP"}).size(), 10u);
  EXPECT_EQ(Run({"PUBSUB", "NUMPAT", "x"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'NUMPAT'. Try PUBSUB HELP.");
  EXPECT_EQ(Run({"PUBSUB", "BOGUS"}).error(),
            "ERR unknown subcommand or wrong number of arguments for 'BOGUS'. Try PUBSUB HELP.");
  EXPECT_EQ(Run({"PUBSUB"}).error(), "ERR wrong number of arguments for 'pubsub' command");
  // A closed client's subscriptions go.
  SwitchClient(0);
  Run({"RESET"});
  SwitchClient(2);
  EXPECT_TRUE(Run({"PUBSUB", "NUMPAT"}).is_integer(0));
  EXPECT_TRUE(Run({"PUBLISH", "news", "hi"}).is_integer(1));
}

TEST_F(PubSubCommands, AclChannelRules) {
  EXPECT_EQ(Run({"ACL", "SETUSER", "u", "on", "nopass", "+@all", "~*", "&news*", "&x"}), "OK");
  RespValue u = Run({"ACL", "GETUSER", "u"});
  EXPECT_EQ(*u.Find("channels"), "&news* &x");
  EXPECT_EQ(Run({"ACL", "SETUSER", "u", "&*", "&y"}).error(),
            "ERR Error in ACL SETUSER modifier '&y': Adding a pattern after the * pattern (or "
            "the 'allchannels' flag) is not valid and does not have any effect. Try "
            "'resetchannels' to start with an empty list of channels");
  // A new user starts with acl-pubsub-default (resetchannels).
  EXPECT_EQ(Run({"ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*"}), "OK");
  EXPECT_EQ(*Run({"ACL", "GETUSER", "v"}).Find("channels"), "");
  EXPECT_EQ(Run({"AUTH", "u", "x"}), "OK");
  EXPECT_TRUE(Run({"PUBLISH", "news1", "m"}).is_integer(0));
  EXPECT_EQ(Run({"PUBLISH", "other", "m"}).error(),
            "NOPERM this user has no permissions to access one of the channels used as "
            "arguments");
  RunMany({"SUBSCRIBE", "news2", "x"});
  EXPECT_EQ(client().info().pubsub.load(), true);
  RunMany({"UNSUBSCRIBE"});
  EXPECT_EQ(Run({"SUBSCRIBE", "news2", "y"}).error(),
            "NOPERM this user has no permissions to access one of the channels used as "
            "arguments");
  // Patterns are compared literally.
  EXPECT_EQ(Run({"PSUBSCRIBE", "new*"}).error().substr(0, 6), "NOPERM");
  EXPECT_EQ(Run({"PSUBSCRIBE", "news1*"}).error().substr(0, 6), "NOPERM");
  Run({"PSUBSCRIBE", "news*"});
  EXPECT_EQ(last_wire(), "*3\r\n$10\r\npsubscribe\r\n$5\r\nnews*\r\n:1\r\n");
  Run({"PUNSUBSCRIBE"});
  EXPECT_EQ(Run({"SSUBSCRIBE", "zz"}).error().substr(0, 6), "NOPERM");
  EXPECT_EQ(Run({"SPUBLISH", "zz", "m"}).error().substr(0, 6), "NOPERM");
  SwitchClient(1);
  RespValue log = Run({"ACL", "LOG", "1"});
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(*log[0].Find("reason"), "channel");
  EXPECT_EQ(*log[0].Find("object"), "zz");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "PUBLISH", "q", "m"}),
            "This user has no permissions to access the 'q' channel");
  EXPECT_EQ(Run({"ACL", "DRYRUN", "u", "PUBLISH", "x", "m"}), "OK");
}

TEST_F(PubSubCommands, AclPubsubDefault) {
  EXPECT_EQ(Run({"CONFIG", "GET", "acl-pubsub-default"})[1], "resetchannels");
  EXPECT_EQ(Run({"CONFIG", "SET", "acl-pubsub-default", "allchannels"}), "OK");
  EXPECT_EQ(Run({"ACL", "SETUSER", "w", "on"}), "OK");
  EXPECT_EQ(*Run({"ACL", "GETUSER", "w"}).Find("channels"), "&*");
  EXPECT_TRUE(Run({"CONFIG", "SET", "acl-pubsub-default", "some"}).is_error());
}

TEST_F(PubSubCommands, NotifyKeyspaceEventsCanonicalForm) {
  EXPECT_EQ(Run({"CONFIG", "GET", "notify-keyspace-events"})[1], "");
  const std::pair<const char*, const char*> kCases[] = {{"gKE", "gKE"}, {"$lshzxeKE", "$lshzxeKE"},
                                                        {"KA", "AK"},   {"EA", "AE"},
                                                        {"Ex", "xE"},   {"Kmd", "dKm"},
                                                        {"An", "A"},    {"En", "nE"}};
  for (const auto& [in, out] : kCases) {
    EXPECT_EQ(Run({"CONFIG", "SET", "notify-keyspace-events", in}), "OK") << in;
    EXPECT_EQ(Run({"CONFIG", "GET", "notify-keyspace-events"})[1], out) << in;
  }
  EXPECT_TRUE(Run({"CONFIG", "SET", "notify-keyspace-events", "KEQ"}).is_error());
  EXPECT_EQ(Run({"CONFIG", "GET", "notify-keyspace-events"})[1], "nE");
  uint32_t f = 0;
  ASSERT_TRUE(ParseNotifyFlags("A", &f));
  EXPECT_TRUE(f & kNotifyModule);  // A includes d
  EXPECT_FALSE(f & kNotifyNew);
}

TEST_F(PubSubCommands, OutputBufferLimitClasses) {
  EXPECT_EQ(Run({"CONFIG", "GET", "client-output-buffer-limit"})[1],
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
  EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit", "pubsub 100kb 10kb 5"}), "OK");
  EXPECT_EQ(Run({"CONFIG", "GET", "client-output-buffer-limit"})[1],
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 102400 10240 5");
  EXPECT_EQ(server().settings().pubsub_output_limits().hard, 102400u);
  EXPECT_EQ(Run({"CONFIG", "SET", "client-output-buffer-limit",
                 "normal 2mb 1mb 3 replica 0 0 0 pubsub 0 0 0"}),
            "OK");
  EXPECT_EQ(Run({"CONFIG", "GET", "client-output-buffer-limit"})[1],
            "normal 2097152 1048576 3 slave 0 0 0 pubsub 0 0 0");
  for (const char* bad : {"master 1 2 3", "pubsub 1 2", "pubsub x 0 0", "normal 1mb 0 0 pubsub"})
    EXPECT_TRUE(Run({"CONFIG", "SET", "client-output-buffer-limit", bad}).is_error()) << bad;
  EXPECT_EQ(Run({"CONFIG", "GET", "client-output-buffer-limit"})[1],
            "normal 2097152 1048576 3 slave 0 0 0 pubsub 0 0 0");
}

TEST_F(PubSubCommands, CommandInfoAndCategories) {
  RespValue r = Run({"COMMAND", "INFO", "PUBLISH", "SUBSCRIBE"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0][0], "publish");
  RespValue docs = Run({"COMMAND", "DOCS", "PUBSUB"});
  ASSERT_EQ(docs.size(), 2u);
  RespValue cat = Run({"ACL", "CAT", "pubsub"});
  EXPECT_GE(cat.size(), 9u);
}

}  // namespace
}  // namespace pion::server::testing
