// The command table and the context a handler runs in. A handler parses its
// arguments (views into the connection's input, valid for the call), does its
// work through the Server, and writes exactly one reply through ctx.reply.
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

#include "server/net_types.h"

namespace pion::server {

class Server;

struct CommandContext {
  std::span<const std::string_view> args;  // args[0] is the command name as sent
  ReplyBuilder* reply = nullptr;
  Server* server = nullptr;
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

// Flags, as COMMAND INFO reports them.
enum CommandFlags : uint32_t {
  kCmdWrite = 1u << 0,
  kCmdReadonly = 1u << 1,
  kCmdAdmin = 1u << 2,
  kCmdFast = 1u << 3,
  kCmdNoAuth = 1u << 4,   // allowed before AUTH
  kCmdLoading = 1u << 5,  // allowed while loading (-LOADING otherwise)
  kCmdStale = 1u << 6,
  kCmdKvcache = 1u << 7,  // needs --kvcache ("-NOKVCACHE V-store not enabled (use --kvcache)")
  kCmdDenyOom = 1u << 8,
  // The handler checks its own argument count (its own "requires: ..." texts);
  // `arity` stays what COMMAND reports, admission only insists on the name.
  kCmdOwnArity = 1u << 9,
  kCmdTxControl = 1u << 10,  // runs at once inside MULTI and takes no exec lock (MULTI, EXEC, ...)
  kCmdNoMulti = 1u << 11,    // refused inside MULTI (its reply is completed later)
  // Allowed in RESP2 subscribed mode (the subscribe family, PING, QUIT, RESET).
  kCmdPubSubContext = 1u << 20,
};

// ACL categories (ACL CAT, +@<category>), as COMMAND INFO lists them. A spec's
// categories are its `acl_categories` plus those its flags imply (see
// CommandCategories in server/acl.h): kCmdWrite -> @write, kCmdReadonly ->
// @read, kCmdAdmin -> @admin @dangerous, kCmdFast -> @fast (else @slow).
// @kvcache, @attend, @string, @keyspace are named per family (kCmdKvcache only
// says the command needs the store). Bit order is ACL CAT's order; never renumber.
enum AclCategory : uint32_t {
  kAclKeyspace = 1u << 0,
  kAclRead = 1u << 1,
  kAclWrite = 1u << 2,
  kAclSet = 1u << 3,
  kAclSortedset = 1u << 4,
  kAclList = 1u << 5,
  kAclHash = 1u << 6,
  kAclString = 1u << 7,
  kAclBitmap = 1u << 8,
  kAclHyperloglog = 1u << 9,
  kAclGeo = 1u << 10,
  kAclStream = 1u << 11,
  kAclPubsub = 1u << 12,
  kAclAdmin = 1u << 13,
  kAclFast = 1u << 14,
  kAclSlow = 1u << 15,
  kAclBlocking = 1u << 16,
  kAclDangerous = 1u << 17,
  kAclConnection = 1u << 18,
  kAclTransaction = 1u << 19,
  kAclScripting = 1u << 20,
  kAclKvcache = 1u << 21,  // pion: the KV.PREFIX.* / V.* families
  kAclAttend = 1u << 22,   // pion: ATTEND.* (Stage 2)
};

enum AclKeyFlags : uint32_t {
  kAclKeyNamespace = 1u << 0,  // a key argument may be a derived sid (see CommandSpec)
  // A key is checked as given and, when it is a sid, as its namespace too (DEL of
  // "<ns>_pk" drops the namespace <ns>).
  kAclKeyAlsoOwner = 1u << 1,
  // The command returns the keys' values although it writes them (GETDEL, GETEX, RENAME's
  // source): read permission as well as write (Redis's ACCESS key-spec flag).
  kAclKeyAccess = 1u << 2,
  // kAclKeyAccess only when a GET argument follows the value (SET ... GET).
  kAclKeyAccessIfGet = 1u << 3,
  // The keys need read permission only (WATCH: it reveals whether a key changed).
  kAclKeyReadOnly = 1u << 4,
  // Pub/Sub channel arguments, checked against the user's &patterns: every
  // argument (SUBSCRIBE, SSUBSCRIBE), the first one (PUBLISH, SPUBLISH), every
  // argument as a pattern (PSUBSCRIBE).
  kAclChannelArgs = 1u << 8,
  kAclChannelFirst = 1u << 9,
  kAclChannelPatterns = 1u << 10,
  // The keys are the numkeys arguments from first_key on, numkeys being the
  // argument before first_key (KV.BLOCK.MATCH; last_key is ignored).
  kAclKeyNumkeys = 1u << 5,
  // KV.BLOCK.CHAIN: the AFTER key, and every other argument from the first key
  // after the keyword options (ChainFirstKey).
  kAclKeyChain = 1u << 6,
};

struct CommandSpec {
  const char* name;  // upper case, e.g. "KV.PREFIX.REGISTER"
  int arity;         // Redis convention: >0 exact, <0 at least -arity (name included)
  uint32_t flags;
  int first_key, last_key, key_step;
  CommandHandler handler;
  const char* summary;  // one line, for COMMAND DOCS
  // ACL categories beyond those the flags imply (AclCategory bits).
  uint32_t acl_categories = 0;
  // ACL key checks (server/acl.h): the arguments first_key..last_key (step
  // key_step) name keys (plain keys by default); with kAclKeyNamespace each is a namespace or a
  // session id, and a sid "<ns>_pk" / "<ns>_pv" / "<ns>_attn" is checked as
  // its namespace <ns>. Keys of a kCmdWrite command need write permission
  // (%W~), of a kCmdReadonly one read permission (%R~), of others both.
  uint32_t acl_key_flags = 0;
};

// Adds the KV.PREFIX.*, V.*, PION.STATS and ATTEND.PREFIX.* commands
// (src/server/commands/kvprefix.cc, vstore.cc, stats.cc, attend.cc).
void AddKvPrefixCommands(std::vector<CommandSpec>* out);
void AddAttendCommands(std::vector<CommandSpec>* out);
// The Stage-2 lines ("sdpa_warm:..." etc.) of KV.PREFIX.INFO and INFO's # Pion section.
void AppendAttendInfo(Server& s, std::string* out);
void AddVStoreCommands(std::vector<CommandSpec>* out);
void AddStatsCommands(std::vector<CommandSpec>* out);
// String and generic key commands (commands/strings.cc) and transactions
// (commands/transaction.cc).
void AddStringCommands(std::vector<CommandSpec>* out);
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
