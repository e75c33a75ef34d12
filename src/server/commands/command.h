// The command table and the context a handler runs in. A handler parses its
// arguments (views into the connection's input, valid for the call), does its
// work through ctx.env (server/command_env.h: the store, the receipt, the ACL
// and the other components, and ServerControl for what spans the server), and
// writes exactly one reply through ctx.reply.
// Commands that change state set ctx.wait_lsn to the log position that must be
// durable before the reply may be sent (the connection holds it until then).
// A handler whose work must not block the worker (a snapshot, an fsync) calls
// ctx.Defer() instead of replying and completes the ticket later from a
// background thread (net/deferred_reply.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/owned_buffer.h"
#include "kvproto/command_flags.h"
#include "net/buffer.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "net/deferred_reply.h"
#include "net/pinned_block.h"
#include "net/reply.h"
#include "net/request_parser.h"  // kBigArgBytes

namespace pion::server {

// What a handler sees of the transport: the reply it writes, who sent the
// command, the ticket of a deferred reply and the buffers a value may keep.
// Nothing of the connection, its parser or its writer (server/net_types.h
// names those for the server's own files).
using net::ClientControl;
using net::ClientInfo;
using net::DeferredReply;
using net::IoBuf;
using net::kBigArgBytes;
using net::PinnedBlock;
using net::ReplyBuilder;

class CommandEnv;

struct CommandContext {
  std::span<const std::string_view> args;  // args[0] is the command name as sent
  ReplyBuilder* reply = nullptr;
  CommandEnv* env = nullptr;  // the server's components (server/command_env.h)
  ClientInfo* client = nullptr;
  uint64_t wait_lsn = 0;
  bool deferred = false;  // set by Defer()
  // Set for a command EXEC runs: its reply is one element of EXEC's array and must be
  // written before the next one, so it may not defer.
  bool in_exec = false;
  // Set by EXEC: the error replies of the commands it ran, each already counted
  // on its own command (INFO commandstats/errorstats), not as EXEC's failure.
  uint64_t inner_errors = 0;
  // What keeps argument memory alive until the dispatch is over (the command's
  // stats, SLOWLOG and MONITOR read ctx.args after the handler): a handler that
  // took a big argument's buffer (TakeArg) keeps its owner here.
  std::vector<std::shared_ptr<const void>> pins;

  // The buffer a big argument `arg` (a view of ctx.args) was received into, so
  // the handler may keep the bytes without copying them (empty when there is
  // none: a small argument, a queued command's copy, a transport that has no
  // such buffers). The caller must keep the buffer's new owner in `pins`.
  OwnedBuffer TakeArg(std::string_view arg) {
    if (client == nullptr || client->control == nullptr || in_exec || arg.size() < kBigArgBytes)
      return OwnedBuffer();
    return client->control->TakeArgBuffer(arg);
  }

  // Whether Defer() may be called: the client has a ClientControl (the RESP connection,
  // or another transport such as the binary fast lane, net/client_control.h) to take
  // the ticket from. Handlers whose deferral is an optimisation (the attention queries,
  // KV.PREFIX.WARM) do their work inline when it is false (always inside EXEC).
  bool CanDefer() const {
    return client != nullptr && client->control != nullptr && !deferred && !in_exec;
  }

  // Takes the reply's place in the connection's output and returns the ticket
  // that completes it (at most once per call; write nothing through `reply`
  // then). ctx.args are views into the input and die with the call: copy what
  // the background work needs. Implemented in command_service.cc.
  std::shared_ptr<DeferredReply> Defer();
};

using CommandHandler = void (*)(CommandContext& ctx);

// A subcommand of a container command (CLIENT LIST), declared next to its
// parent's row: it has a COMMAND DOCS entry, a statistics slot ("client|list",
// command_table.h) and an ACL rule (+client|list) of its own. Its group is the
// parent's.
struct SubcommandDoc {
  const char* name;     // upper case, after the parent's: "LIST"
  const char* since;    // first version
  const char* syntax;   // its arguments after the subcommand (grammar: command_docs.h)
  const char* summary;  // one line
};

// One command's row: everything about it (execution, ACL, COMMAND INFO and
// COMMAND DOCS) is here, written in its family's file.
struct CommandSpec {
  const char* name;  // upper case, e.g. "KV.PREFIX.REGISTER"
  int arity;         // Redis convention: >0 exact, <0 at least -arity (name included)
  uint32_t flags;
  int first_key, last_key, key_step;
  CommandHandler handler;
  const char* summary;  // one line, for COMMAND DOCS
  // COMMAND DOCS: the group as Redis names it ("string", "connection",
  // "server", "pion", ...), the version the command appeared in, and its
  // arguments after the name (grammar: command_docs.h; "" for none).
  const char* group = nullptr;
  const char* since = nullptr;
  const char* syntax = nullptr;
  // A container command's subcommands (CLIENT's LIST, ...), in the order
  // COMMAND DOCS and COMMAND LIST report them.
  std::span<const SubcommandDoc> subcommands = {};
  // ACL categories beyond those the flags imply (AclCategory bits).
  uint32_t acl_categories = 0;
  // ACL key checks (server/acl.h): the arguments first_key..last_key (step
  // key_step) name keys (plain keys by default); with kAclKeyNamespace each is a namespace or a
  // session id, and a sid "<ns>_pk" / "<ns>_pv" / "<ns>_attn" is checked as
  // its namespace <ns>. Keys of a kCmdWrite command need write permission
  // (%W~), of a kCmdReadonly one read permission (%R~), of others both.
  uint32_t acl_key_flags = 0;
};

// A pion command's handler, by the name of its row in kvproto/pion_commands.h
// (which holds everything else about it).
struct PionHandler {
  const char* name;
  CommandHandler handler;
};
// Adds the row of each of `handlers`, in that order, with its handler (a
// name without a row, or a module-only row, is a programming error).
void AddPionCommands(std::span<const PionHandler> handlers, std::vector<CommandSpec>* out);

// Adds the KV.PREFIX.*, V.*, PION.STATS and ATTEND.PREFIX.* commands
// (src/server/commands/kvprefix.cc, vstore.cc, stats.cc, attend.cc).
void AddKvPrefixCommands(std::vector<CommandSpec>* out);
void AddAttendCommands(std::vector<CommandSpec>* out);
// The Stage-2 lines ("sdpa_warm:..." etc.) of KV.PREFIX.INFO and INFO's # Pion section.
void AppendAttendInfo(CommandEnv& s, std::string* out);
void AddVStoreCommands(std::vector<CommandSpec>* out);
void AddStatsCommands(std::vector<CommandSpec>* out);
// String commands (commands/strings.cc) and transactions
// (commands/transaction.cc).
void AddStringCommands(std::vector<CommandSpec>* out);
// EXISTS, DEL, TYPE, RENAME, KEYS, SCAN, the EXPIRE/TTL family (commands/keys.cc).
void AddKeyCommands(std::vector<CommandSpec>* out);
// INCR/DECR family (commands/counters.cc), GETSET/SETRANGE/LCS
// (commands/string_edit.cc), the bit commands (commands/bitops.cc), COPY/TOUCH/
// OBJECT (commands/keys_object.cc).
void AddCounterCommands(std::vector<CommandSpec>* out);
void AddStringEditCommands(std::vector<CommandSpec>* out);
void AddBitCommands(std::vector<CommandSpec>* out);
void AddKeyObjectCommands(std::vector<CommandSpec>* out);
// DUMP / RESTORE (commands/dump_restore.cc, payload in commands/rdb_payload.h).
void AddDumpRestoreCommands(std::vector<CommandSpec>* out);
// The KV.BLOCK.* family (commands/kvblock.cc).
void AddKvBlockCommands(std::vector<CommandSpec>* out);
// KV.BLOCK.CHAIN's first key argument (0 when its options do not parse).
size_t ChainFirstKey(std::span<const std::string_view> args);
// The key arguments of a command line by its spec (first/last/step, or the
// kAclKeyNumkeys / kAclKeyChain rules), in order: ACL checks, COMMAND GETKEYS.
void CommandKeyIndexes(const CommandSpec& spec, std::span<const std::string_view> args,
                       std::vector<int>* out);
void AddTransactionCommands(std::vector<CommandSpec>* out);
// Pub/Sub (commands/pubsub.cc).
void AddPubSubCommands(std::vector<CommandSpec>* out);

}  // namespace pion::server
