// The cluster-client start-up subset in an emulated single-node mode
// (--cluster-emulated yes, docs/cluster.md): one node, this server, owns every
// slot 0-16383, so a Redis Cluster client (redis-py RedisCluster, go-redis, ...)
// runs the same code against one pion-server as against a Redis Cluster of pion.so
// modules. Nothing is ever redirected: there are no other nodes. Without the option
// every subcommand answers Redis's "cluster support disabled" error, as a
// non-cluster Redis does.
//
// CLUSTER SLOTS / SHARDS / NODES / INFO / MYID / KEYSLOT / HELP, READONLY, READWRITE.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/keyslot.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

constexpr int64_t kLastSlot = kClusterSlots - 1;

// This node's 40-hex-digit id, random once per process (as a fresh Redis node's).
const std::string& NodeId() {
  static const std::string id = [] {
    std::random_device rd;
    std::string s;
    char buf[9];
    for (int i = 0; i < 5; ++i) {
      std::snprintf(buf, sizeof(buf), "%08x", static_cast<unsigned>(rd()));
      s += buf;
    }
    return s;
  }();
  return id;
}

bool Emulated(CommandContext& ctx) {
  if (ctx.env->config().cluster_emulated) return true;
  ctx.reply->Error(kErrClusterDisabled);
  return false;
}

// The address clients should use for this node: the one this client reached us
// on (right behind NAT or a port forward too), else the bind address.
std::string NodeIp(CommandContext& ctx) {
  if (ctx.client != nullptr) {
    const std::string& l = ctx.client->laddr;
    size_t colon = l.rfind(':');
    if (colon != std::string::npos && colon > 0) {
      std::string ip = l.substr(0, colon);
      if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
      return ip;
    }
  }
  return ctx.env->config().bind;
}

void ClusterSlots(CommandContext& ctx) {
  ReplyBuilder& r = *ctx.reply;
  r.ArrayHeader(1);
  r.ArrayHeader(3);
  r.Integer(0);
  r.Integer(kLastSlot);
  r.ArrayHeader(4);
  r.Bulk(NodeIp(ctx));
  r.Integer(ctx.env->control().port());
  r.Bulk(NodeId());
  r.MapHeader(0);
}

void ClusterShards(CommandContext& ctx) {
  ReplyBuilder& r = *ctx.reply;
  r.ArrayHeader(1);
  r.MapHeader(2);
  r.Bulk("slots");
  r.ArrayHeader(2);
  r.Integer(0);
  r.Integer(kLastSlot);
  r.Bulk("nodes");
  r.ArrayHeader(1);
  r.MapHeader(7);
  r.Bulk("id");
  r.Bulk(NodeId());
  r.Bulk("port");
  r.Integer(ctx.env->control().port());
  r.Bulk("ip");
  r.Bulk(NodeIp(ctx));
  r.Bulk("endpoint");
  r.Bulk(NodeIp(ctx));
  r.Bulk("role");
  r.Bulk("master");
  r.Bulk("replication-offset");
  r.Integer(0);
  r.Bulk("health");
  r.Bulk("online");
}

void ClusterNodes(CommandContext& ctx) {
  // <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slots>
  int port = ctx.env->control().port();
  std::string line = NodeId() + " " + NodeIp(ctx) + ":" + std::to_string(port) + "@" +
                     std::to_string(port) + " myself,master - 0 0 1 connected 0-" +
                     std::to_string(kLastSlot) + "\n";
  ctx.reply->Bulk(line);
}

void ClusterInfo(CommandContext& ctx) {
  std::string out;
  InfoField(&out, "cluster_enabled", 1);
  InfoField(&out, "cluster_state", "ok");
  InfoField(&out, "cluster_slots_assigned", kClusterSlots);
  InfoField(&out, "cluster_slots_ok", kClusterSlots);
  InfoField(&out, "cluster_slots_pfail", 0);
  InfoField(&out, "cluster_slots_fail", 0);
  InfoField(&out, "cluster_known_nodes", 1);
  InfoField(&out, "cluster_size", 1);
  InfoField(&out, "cluster_current_epoch", 1);
  InfoField(&out, "cluster_my_epoch", 1);
  InfoField(&out, "cluster_emulated", 1);
  ctx.reply->Bulk(out);
}

void Cluster(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  if (IsKeyword(sub, "HELP")) {
    static const char* kLines[] = {
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SLOTS",
        "    Slot ranges and the node serving them (one node: 0-16383).",
        "SHARDS",
        "    The shards of the cluster (one).",
        "NODES",
        "    The cluster configuration in the CLUSTER NODES format.",
        "INFO",
        "    The cluster state.",
        "MYID",
        "    This node's id.",
        "KEYSLOT <key>",
        "    The hash slot of <key>.",
        "HELP",
        "    Print this help.",
    };
    ctx.reply->ArrayHeader(std::size(kLines));
    for (const char* l : kLines) ctx.reply->SimpleString(l);
    return;
  }
  if (!Emulated(ctx)) return;
  const size_t n = ctx.args.size();
  auto arity = [&](size_t want, const char* name) {
    if (n == want) return true;
    ctx.reply->Error(WrongArity(name));
    return false;
  };
  if (IsKeyword(sub, "SLOTS")) {
    if (arity(2, "cluster|slots")) ClusterSlots(ctx);
  } else if (IsKeyword(sub, "SHARDS")) {
    if (arity(2, "cluster|shards")) ClusterShards(ctx);
  } else if (IsKeyword(sub, "NODES")) {
    if (arity(2, "cluster|nodes")) ClusterNodes(ctx);
  } else if (IsKeyword(sub, "INFO")) {
    if (arity(2, "cluster|info")) ClusterInfo(ctx);
  } else if (IsKeyword(sub, "MYID")) {
    if (arity(2, "cluster|myid")) ctx.reply->Bulk(NodeId());
  } else if (IsKeyword(sub, "KEYSLOT")) {
    if (arity(3, "cluster|keyslot")) ctx.reply->Integer(KeySlot(ctx.args[2]));
  } else {
    ctx.reply->Error(UnknownSubcommandError("CLUSTER", sub));
  }
}

// READONLY / READWRITE: replica reads on or off for this connection. One node has
// no replicas, so both only acknowledge.
void ReadOnlyOrWrite(CommandContext& ctx) {
  if (!Emulated(ctx)) return;
  ctx.reply->SimpleString("OK");
}

}  // namespace

// CLUSTER's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kClusterSubcommands[] = {
    {"SLOTS", "3.0.0", "", "Returns the slot ranges and their node."},
    {"SHARDS", "7.0.0", "", "Returns the shards of the cluster."},
    {"NODES", "3.0.0", "", "Returns the cluster configuration of a node."},
    {"INFO", "3.0.0", "", "Returns information about the cluster state."},
    {"MYID", "3.0.0", "", "Returns the ID of a node."},
    {"KEYSLOT", "3.0.0", "key", "Returns the hash slot of a key."},
    {"HELP", "5.0.0", "", "Returns helpful text about the subcommands."},
};

void AddClusterCommands(std::vector<CommandSpec>* out) {
  out->push_back({"CLUSTER", -2, kCmdLoading | kCmdStale, 0, 0, 0, Cluster,
                  "Cluster topology for cluster clients (--cluster-emulated: one node, all slots)",
                  "cluster", "3.0.0", "", kClusterSubcommands});
  out->back().acl_categories |= kAclConnection;  // a cluster client's start-up, as READONLY
  out->push_back({"READONLY", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, ReadOnlyOrWrite,
                  "Allow replica reads on this connection (--cluster-emulated)", "cluster", "3.0.0",
                  ""});
  out->back().acl_categories |= kAclConnection;
  out->push_back({"READWRITE", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, ReadOnlyOrWrite,
                  "Disallow replica reads on this connection (--cluster-emulated)", "cluster",
                  "3.0.0", ""});
  out->back().acl_categories |= kAclConnection;
}

}  // namespace pion::server
