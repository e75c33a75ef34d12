// Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
// SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB (docs/protocol.md
// "Pub/Sub"), as Redis 7.0 answers them. The registry is server/pubsub.h; a
// subscriber's confirmations are pushes (RESP3 ">3", RESP2 arrays), written
// even while CLIENT REPLY OFF drops the command's reply, as Redis does.
#include <string>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

// Where the confirmations go (see the file comment).
ReplyBuilder* Out(CommandContext& ctx) {
  if (!ctx.in_exec && ctx.client->control != nullptr) {
    if (ReplyBuilder* w = ctx.client->control->PushWriter()) return w;
  }
  return ctx.reply;
}

void Confirm(ReplyBuilder* rb, std::string_view kind, const std::string_view* name, size_t count) {
  rb->PushHeader(3);
  rb->Bulk(kind);
  if (name != nullptr)
    rb->Bulk(*name);
  else
    rb->Null();
  rb->Integer(static_cast<int64_t>(count));
}

// Whether the client still holds a subscription of any kind (CLIENT_PUBSUB).
void UpdateMode(CommandContext& ctx) {
  size_t sub = 0, psub = 0, ssub = 0;
  ctx.env->pubsub().ClientCounts(ctx.client->id, &sub, &psub, &ssub);
  constexpr auto kR = std::memory_order_relaxed;
  ctx.client->sub.store(static_cast<uint32_t>(sub), kR);
  ctx.client->psub.store(static_cast<uint32_t>(psub), kR);
  ctx.client->ssub.store(static_cast<uint32_t>(ssub), kR);
  ctx.client->pubsub.store(sub + psub + ssub > 0, kR);
}

void SubscribeKind(CommandContext& ctx, PubSub::Kind k, std::string_view confirm) {
  ReplyBuilder* rb = Out(ctx);
  PubSub& ps = ctx.env->pubsub();
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    size_t count = 0;
    ps.Subscribe(k, ctx.client->worker, ctx.client->id, ctx.args[i], &count);
    Confirm(rb, confirm, &ctx.args[i], count);
  }
  UpdateMode(ctx);
}

// Messages a publisher matched before the registry dropped a subscription may
// still wait in this worker's mailbox: they go out before the confirmation,
// as in Redis no message follows it (not inside EXEC, whose reply is one array).
void FlushMailbox(CommandContext& ctx) {
  if (!ctx.in_exec) ctx.env->control().DeliverQueuedPushes(ctx.client->worker);
}

void UnsubscribeKind(CommandContext& ctx, PubSub::Kind k, std::string_view confirm) {
  ReplyBuilder* rb = Out(ctx);
  PubSub& ps = ctx.env->pubsub();
  size_t count = 0;
  if (ctx.args.size() == 1) {
    std::vector<std::string> all = ps.ClientList(k, ctx.client->id);
    std::vector<size_t> counts;
    for (const std::string& name : all) {
      ps.Unsubscribe(k, ctx.client->id, name, &count);
      counts.push_back(count);
    }
    FlushMailbox(ctx);
    for (size_t i = 0; i < all.size(); ++i) {
      std::string_view v = all[i];
      Confirm(rb, confirm, &v, counts[i]);
    }
    if (all.empty()) {
      // Subscribed to nothing: still one reply, with a null name.
      size_t sub = 0, psub = 0, ssub = 0;
      ps.ClientCounts(ctx.client->id, &sub, &psub, &ssub);
      Confirm(rb, confirm, nullptr, k == PubSub::kShard ? ssub : sub + psub);
    }
  } else {
    std::vector<size_t> counts;
    for (size_t i = 1; i < ctx.args.size(); ++i) {
      ps.Unsubscribe(k, ctx.client->id, ctx.args[i], &count);
      counts.push_back(count);
    }
    FlushMailbox(ctx);
    for (size_t i = 1; i < ctx.args.size(); ++i) Confirm(rb, confirm, &ctx.args[i], counts[i - 1]);
  }
  UpdateMode(ctx);
}

void Subscribe(CommandContext& ctx) { SubscribeKind(ctx, PubSub::kChannel, "subscribe"); }
void Unsubscribe(CommandContext& ctx) { UnsubscribeKind(ctx, PubSub::kChannel, "unsubscribe"); }
void PSubscribe(CommandContext& ctx) { SubscribeKind(ctx, PubSub::kPattern, "psubscribe"); }
void PUnsubscribe(CommandContext& ctx) { UnsubscribeKind(ctx, PubSub::kPattern, "punsubscribe"); }
void SSubscribe(CommandContext& ctx) { SubscribeKind(ctx, PubSub::kShard, "ssubscribe"); }
void SUnsubscribe(CommandContext& ctx) { UnsubscribeKind(ctx, PubSub::kShard, "sunsubscribe"); }

void Publish(CommandContext& ctx) {
  size_t n = ctx.env->pubsub().Publish(false, ctx.args[1], ctx.args[2]);
  ctx.reply->Integer(static_cast<int64_t>(n));
}

void SPublish(CommandContext& ctx) {
  size_t n = ctx.env->pubsub().Publish(true, ctx.args[1], ctx.args[2]);
  ctx.reply->Integer(static_cast<int64_t>(n));
}

void PubSubCmd(CommandContext& ctx) {
  const auto& a = ctx.args;
  ReplyBuilder* rb = ctx.reply;
  PubSub& ps = ctx.env->pubsub();
  std::string_view sub = a[1];
  if (a.size() == 2 && EqualsIgnoreCase(sub, "HELP")) {
    static const char* const kHelp[] = {
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        ("    Return the currently active shard level channels matching a <pattern> (default: "
         "'*')."),
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Print this help.",
    };
    rb->ArrayHeader(std::size(kHelp));
    for (const char* line : kHelp) rb->SimpleString(line);
    return;
  }
  bool channels = EqualsIgnoreCase(sub, "CHANNELS");
  bool shardchannels = EqualsIgnoreCase(sub, "SHARDCHANNELS");
  if ((channels || shardchannels) && (a.size() == 2 || a.size() == 3)) {
    std::vector<std::string> list =
        ps.Channels(shardchannels, a.size() == 3, a.size() == 3 ? a[2] : std::string_view());
    rb->ArrayHeader(list.size());
    for (const std::string& c : list) rb->Bulk(c);
    return;
  }
  bool numsub = EqualsIgnoreCase(sub, "NUMSUB");
  if (numsub || EqualsIgnoreCase(sub, "SHARDNUMSUB")) {
    rb->ArrayHeader((a.size() - 2) * 2);
    for (size_t j = 2; j < a.size(); ++j) {
      rb->Bulk(a[j]);
      rb->Integer(static_cast<int64_t>(ps.NumSub(!numsub, a[j])));
    }
    return;
  }
  if (EqualsIgnoreCase(sub, "NUMPAT") && a.size() == 2) {
    rb->Integer(static_cast<int64_t>(ps.NumPat()));
    return;
  }
  rb->Error(UnknownSubcommandOrArityError("PUBSUB", sub));
}

}  // namespace

// PUBSUB's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kPubsubSubcommands[] = {
    {"CHANNELS", "2.8.0", "[pattern]", "Returns the active channels."},
    {"NUMSUB", "2.8.0", "[channel [channel ...]]", "Returns a count of subscribers to channels."},
    {"NUMPAT", "2.8.0", "", "Returns a count of unique pattern subscriptions."},
    {"SHARDCHANNELS", "7.0.0", "[pattern]", "Returns the active shard channels."},
    {"SHARDNUMSUB", "7.0.0", "[shardchannel [shardchannel ...]]",
     "Returns the count of subscribers of shard channels."},
    {"HELP", "6.2.0", "", "Returns helpful text about the subcommands."},
};

void AddPubSubCommands(std::vector<CommandSpec>* out) {
  // Every one runs in RESP2 subscribed mode except PUBLISH, SPUBLISH and PUBSUB.
  constexpr uint32_t kSub = kCmdLoading | kCmdStale | kCmdPubSubContext;
  size_t first = out->size();
  out->push_back({"SUBSCRIBE", -2, kSub, 0, 0, 0, Subscribe,
                  "Listens for messages published to channels.", "pubsub", "2.0.0",
                  "channel [channel ...]"});
  out->push_back({"UNSUBSCRIBE", -1, kSub, 0, 0, 0, Unsubscribe,
                  "Stops listening to messages posted to channels.", "pubsub", "2.0.0",
                  "[channel [channel ...]]"});
  out->push_back({"PSUBSCRIBE", -2, kSub, 0, 0, 0, PSubscribe,
                  "Listens for messages published to channels that match one or more patterns.",
                  "pubsub", "2.0.0", "pattern [pattern ...]"});
  out->push_back({"PUNSUBSCRIBE", -1, kSub, 0, 0, 0, PUnsubscribe,
                  "Stops listening to messages published to channels that match one or more "
                  "patterns.",
                  "pubsub", "2.0.0", "[pattern [pattern ...]]"});
  out->push_back({"SSUBSCRIBE", -2, kSub, 0, 0, 0, SSubscribe,
                  "Listens for messages published to shard channels.", "pubsub", "7.0.0",
                  "shardchannel [shardchannel ...]"});
  out->push_back({"SUNSUBSCRIBE", -1, kSub, 0, 0, 0, SUnsubscribe,
                  "Stops listening to messages posted to shard channels.", "pubsub", "7.0.0",
                  "[shardchannel [shardchannel ...]]"});
  out->push_back({"PUBLISH", 3, kCmdLoading | kCmdStale | kCmdFast, 0, 0, 0, Publish,
                  "Posts a message to a channel.", "pubsub", "2.0.0", "channel message"});
  out->push_back({"SPUBLISH", 3, kCmdLoading | kCmdStale | kCmdFast, 0, 0, 0, SPublish,
                  "Post a message to a shard channel", "pubsub", "7.0.0", "shardchannel message"});
  out->push_back({"PUBSUB", -2, kCmdLoading | kCmdStale, 0, 0, 0, PubSubCmd,
                  "A container for Pub/Sub commands.", "pubsub", "2.8.0", "", kPubsubSubcommands});
  (*out)[first + 0].acl_key_flags |= kAclChannelArgs;      // SUBSCRIBE
  (*out)[first + 2].acl_key_flags |= kAclChannelPatterns;  // PSUBSCRIBE
  (*out)[first + 4].acl_key_flags |= kAclChannelArgs;      // SSUBSCRIBE
  (*out)[first + 6].acl_key_flags |= kAclChannelFirst;     // PUBLISH
  (*out)[first + 7].acl_key_flags |= kAclChannelFirst;     // SPUBLISH
  // Shard channels name no keys here (Redis's key specs for them are NOT_KEY):
  // the ACL checks them against the user's &patterns, not its ~patterns.
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclPubsub;
}

}  // namespace pion::server
