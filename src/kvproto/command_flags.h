// What a command is, as every table that lists it says: its flags as COMMAND
// INFO reports them, its ACL categories and how its keys are checked. Shared
// by pion-server's command table and the Redis module's registration
// (kvproto/pion_commands.h).
#pragma once

#include <cstdint>

namespace pion::server {

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

}  // namespace pion::server
