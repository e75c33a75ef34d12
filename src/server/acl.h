// ACL: users, their passwords, command permissions and key patterns, as Redis 7
// does it for pion's commands (docs/security.md).
//
//  * A user is immutable once published: ACL SETUSER builds a new AclUser from
//    the old one plus the rules and swaps it in, so a connection may hold a
//    shared_ptr to the user it authenticated as and read it without a lock.
//  * Every change bumps epoch(). A connection caches its user and the epoch it
//    read it at; Dispatch compares the epoch (one relaxed load) and refreshes
//    from the registry only when it moved.
//  * The fast path: a user that may run every command on every key
//    (`+@all ~*`, the default user) is `unrestricted` and skips all checks.
//  * Key checks: the arguments a CommandSpec names as keys. With
//    kAclKeyNamespace a session id `<ns>_pk`, `<ns>_pv` or `<ns>_attn` is
//    checked as its namespace <ns>. A denial never says which key (the text is
//    Redis 7.0's, the same whether the key exists or not); ACL LOG, readable
//    by admins only, records it.
//
// Thread-safety: Acl's methods may be called from any thread (one mutex);
// AclUser objects are immutable.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "server/commands/command.h"

namespace pion::server {

class CommandTable;
struct AclUser;

// The categories of a command: its acl_categories plus those its flags imply.
uint32_t CommandCategories(const CommandSpec& s);
// The categories of a subcommand (`sub` upper case, "LIST" of CLIENT): its
// command's, plus Redis 7.0's own for the few that differ from their command
// (CLIENT KILL, LIST, NO-EVICT, PAUSE, UNBLOCK, UNPAUSE are @admin @dangerous).
uint32_t SubcommandCategories(const CommandSpec& s, std::string_view sub);
// Category names in ACL CAT order ("keyspace", ..., "kvcache", "attend").
std::span<const char* const> AclCategoryNames();
// The bit of a category name (case-insensitive); 0 if unknown.
uint32_t AclCategoryBit(std::string_view name);

// The namespace a sid belongs to: "a|x_pk" -> "a|x" (also _pv, _attn); any
// other string is its own namespace.
std::string_view AclKeyOwner(std::string_view key);

// The namespaces of `names` a user without allkeys may see (`perm`); all of
// them for one with allkeys. For DBSIZE, FLUSHALL, INFO keyspace.
std::vector<std::string> AclVisibleKeys(const AclUser* u, std::vector<std::string> names,
                                        uint8_t perm);

// Hex SHA-256 of a password (64 lower-case hex digits).
std::string AclHashPassword(std::string_view password);

struct AclKeyPattern {
  std::string glob;
  uint8_t perm;  // kAclPermRead | kAclPermWrite
};
inline constexpr uint8_t kAclPermRead = 1, kAclPermWrite = 2;

struct AclUser {
  std::string name;
  bool enabled = false;
  bool nopass = false;
  std::vector<std::string> passwords;  // hex SHA-256, in order added
  std::vector<uint64_t> allowed;       // bit per command-table index
  std::vector<std::string> cmd_rules;  // as ACL GETUSER prints them ("+@all", "-flushall")
  bool allkeys = false;                // ~* (read and write every key)
  std::vector<AclKeyPattern> keys;     // when !allkeys
  bool allchannels = false;            // &* / allchannels: every Pub/Sub channel
  std::vector<std::string> channels;   // &<pattern> rules, when !allchannels
  bool unrestricted = false;           // every command on every key: no check at all
  // Categories every command of which this user may run (for subcommands that
  // Redis files under a category of their own: CLIENT LIST / KILL are @admin).
  uint32_t full_categories = 0;

  // Subcommand and first-argument rules (+config|get, -config|set, +select|0;
  // server/acl_commands.cc): a bit per statistics slot of the command table
  // (a documented subcommand has its own slot, command_table.h), rules for an
  // args[1] without a slot, and the commands they make depend on args[1]
  // (computed by Acl::Finish; bit per command-table index).
  struct ArgRule {
    size_t index;     // command-table index
    std::string arg;  // args[1], upper case
    bool allow;
  };
  std::vector<uint64_t> allowed_slots;  // bit per stat slot
  std::vector<ArgRule> arg_rules;
  std::vector<uint64_t> by_sub;  // bit per command-table index
  const CommandTable* table = nullptr;
  // Selectors beyond these root permissions (ACL SETUSER ... (<rules>)): each
  // holds only permissions (commands, keys, channels; `enabled` set so that
  // `unrestricted` means what it means here). A call is allowed when the root
  // permissions or one selector allow all of it (Acl::Check).
  std::vector<std::shared_ptr<const AclUser>> selectors;

  bool CommandAllowed(size_t index) const {
    return index / 64 < allowed.size() && (allowed[index / 64] >> (index % 64) & 1);
  }
  bool DecidedBySubcommand(size_t index) const {
    return index / 64 < by_sub.size() && (by_sub[index / 64] >> (index % 64) & 1);
  }
  // Whether this call of the command at `index` is allowed: the command's bit,
  // or its subcommand's rule when it has subcommand rules.
  bool CallAllowed(size_t index, const CommandSpec& spec,
                   std::span<const std::string_view> args) const {
    if (!DecidedBySubcommand(index)) [[likely]]
      return CommandAllowed(index);
    return SubcommandAllowed(index, spec, args);
  }
  bool SubcommandAllowed(size_t index, const CommandSpec& spec,
                         std::span<const std::string_view> args) const;
  // Whether `key` (already mapped to its owner when it is a sid) may be used
  // with `perm`.
  // A `perm` of 0 (a key the command neither reads nor writes: EXISTS, TYPE,
  // TOUCH) needs a pattern of either kind.
  bool KeyAllowed(std::string_view key, uint8_t perm) const;
  // Pub/Sub (acl_channels.cc): whether `channel` may be published or
  // subscribed to; a PSUBSCRIBE pattern (`is_pattern`) must equal one of the
  // user's channel patterns, as Redis compares them.
  bool ChannelAllowed(std::string_view channel, bool is_pattern) const;
  // "&*", or "resetchannels" and each "&<pattern>" (ACL LIST, GETUSER).
  std::string ChannelsDescription() const;
  // The rule list as ACL LIST prints it (after "user <name> "), each selector
  // as " (<keys> <channels> <commands>)".
  std::string Describe() const;
  // A selector's (or the root's) permissions: "<keys> <channels> <commands>".
  std::string PermissionsDescription() const;
  std::string KeysDescription() const;
  std::string CommandsDescription() const;
};

// The check a DROP, DEL/UNLINK or restricted FLUSHALL asks of every namespace
// it would remove, descendants included: the write permission. Empty when `u`
// may write every key; a refusal stores the refused name in `*denied` (if set).
std::function<bool(std::string_view)> SubtreeWriteCheck(const AclUser* u, std::string* denied);

// Why a command was refused.
enum class AclDenial : uint8_t { kNone, kCommand, kKey, kChannel };

// Channel rules (acl_channels.cc): applies `rule` when it is one
// (&<pattern>, allchannels, resetchannels); false when it is not one.
// `*st` gets the error of a refused channel rule.
bool AclApplyChannelRule(AclUser* u, std::string_view rule, Status* st);
// The channel arguments of a Pub/Sub command the user may not use: the first
// refused one in `*denied`. Commands: SUBSCRIBE, SSUBSCRIBE, PSUBSCRIBE,
// PUBLISH, SPUBLISH (spec.acl_key_flags kAclChannelArgs / kAclChannelFirst /
// kAclChannelPatterns).
bool AclChannelsAllowed(const AclUser& u, const CommandSpec& spec,
                        std::span<const std::string_view> args, std::string_view* denied);
// Whether a client of `u` may keep every one of these subscriptions.
bool AclSubscriptionsAllowed(const AclUser& u, const std::vector<std::string>& channels,
                             const std::vector<std::string>& patterns,
                             const std::vector<std::string>& shards);

inline constexpr std::string_view kAclLogTopLevel = "toplevel", kAclLogMulti = "multi";

struct AclLogEntry {
  uint64_t count = 1;
  std::string reason;  // "command", "key", "auth"
  std::string object;  // command name (lower case), key, or "AUTH"
  std::string username;
  std::string context;  // "toplevel", or "multi" (queued in, or run by, MULTI/EXEC)
  uint64_t created_us = 0, updated_us = 0;
  std::string client_info;
};

// ACL files: one "user <name> <rules...>" line per user (blank lines and
// '#' comments ignored). Write replaces the file atomically (temp + rename).
Result<std::vector<std::string>> ReadAclFile(const std::string& path);
Status WriteAclFile(const std::string& path, const std::vector<std::string>& lines);

class Acl {
 public:
  explicit Acl(const CommandTable* commands);

  // Current epoch (bumped by every change).
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  std::shared_ptr<const AclUser> Find(std::string_view name) const;
  std::shared_ptr<const AclUser> Default() const { return Find("default"); }
  // The user `name` if it exists, is on and `password` is one of its
  // passwords (or it is nopass); nullptr otherwise.
  std::shared_ptr<const AclUser> Authenticate(std::string_view name,
                                              std::string_view password) const;
  // Applies rules to user `name` (created empty, off, when missing); all or
  // nothing. The error is the full reply text.
  Status SetUser(std::string_view name, std::span<const std::string_view> rules);
  // Removes users (never "default"); returns how many existed.
  Result<int> DelUsers(std::span<const std::string_view> names);
  std::vector<std::shared_ptr<const AclUser>> Users() const;  // sorted by name
  // Replaces every user with `lines` ("user <name> <rules...>" each). A line
  // that fails leaves everything as it was; the error names the line.
  Status LoadLines(const std::vector<std::string>& lines, std::string_view origin);
  std::vector<std::string> ListLines() const;

  // acl-pubsub-default: whether a new user (and `reset`) starts with allchannels.
  void set_pubsub_default_all(bool all) { pubsub_all_.store(all, std::memory_order_relaxed); }
  bool pubsub_default_all() const { return pubsub_all_.load(std::memory_order_relaxed); }

  // requirepass: the default user's password (empty: nopass).
  void SetDefaultPassword(std::string_view pass);

  // Checks a command (spec at table index `index`) with its arguments.
  // Sets *denied_key to the refused key argument for the log.
  static AclDenial Check(const AclUser& u, const CommandSpec& spec, size_t index,
                         std::span<const std::string_view> args, std::string_view* denied_key);

  // ACL LOG.
  // `context`: "multi" for a client in MULTI and for commands EXEC runs,
  // else "toplevel" (Redis 7.0's words). An entry repeating one of the last
  // ten within 60 s (same reason, context, object and user) is counted on it
  // and moves to the front, as Redis does.
  void Log(std::string_view reason, std::string_view object, std::string_view username,
           std::string client_info, std::string_view context = kAclLogTopLevel);
  std::vector<AclLogEntry> LogEntries(size_t max) const;
  void ResetLog();
  void set_log_max_len(size_t n);

  size_t num_commands() const { return ncommands_; }

 private:
  Status ApplyRule(AclUser* u, std::string_view rule) const;
  // A selector "(<rule> <rule> ...)": a new one from its permission rules.
  Status AddSelector(AclUser* u, std::string_view op) const;
  // One permission rule (keys, channels, commands): what a selector may hold.
  Status ApplyPermissionRule(AclUser* u, std::string_view rule) const;
  // Check's work for the root permissions or one selector.
  static AclDenial CheckOne(const AclUser& u, const CommandSpec& spec, size_t index,
                            std::span<const std::string_view> args, std::string_view* denied_key);
  // The command part of the rules (server/acl_commands.cc): +cmd, -cmd,
  // +@cat, -@cat, +cmd|sub, -cmd|sub; names of Redis commands pion lacks are
  // accepted and kept as written, with no effect.
  Status ApplyCommandRule(AclUser* u, std::string_view rule) const;
  // A new user's empty command bits; every command (and subcommand) allowed or none.
  void InitCommandRules(AclUser* u) const;
  void SetAllCommands(AclUser* u, bool allow) const;
  // Finish's part: which commands depend on their subcommand.
  void FinishCommandRules(AclUser* u) const;
  Status ApplyRuleForInit(AclUser* u, std::span<const std::string_view> rules) const;
  void Finish(AclUser* u) const;
  Status SetUserLocked(std::unordered_map<std::string, std::shared_ptr<const AclUser>>* map,
                       std::string_view name, std::span<const std::string_view> rules) const;

  const CommandTable* commands_;
  size_t ncommands_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const AclUser>> users_;
  std::atomic<uint64_t> epoch_{1};
  std::deque<AclLogEntry> log_;  // newest first
  size_t log_max_len_ = 128;
  std::atomic<bool> pubsub_all_{false};
};

}  // namespace pion::server
