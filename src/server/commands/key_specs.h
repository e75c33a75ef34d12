// Key specs (COMMAND INFO's 9th element) and the per-key flags of COMMAND
// GETKEYSANDFLAGS. A Redis command pion has gets Redis 7.0's specs and flags
// (its src/commands/<name>.json: SET's key is `OW update`, DEL's `RM delete`,
// GETDEL's `RW access delete`, RENAME's two keys two specs ...), so clients and
// proxies that route or cache by them decide as against Redis; pion's own
// commands get one spec derived from the (first, last, step) key range:
// `RW access update` for a write, `RO access` otherwise.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "server/commands/command.h"

namespace pion::server {

// Redis's key-spec flags, in the order Redis prints them.
enum KeySpecFlag : uint32_t {
  kKeyRo = 1u << 0,
  kKeyRw = 1u << 1,
  kKeyOw = 1u << 2,
  kKeyRm = 1u << 3,
  kKeyAccess = 1u << 4,
  kKeyUpdate = 1u << 5,
  kKeyInsert = 1u << 6,
  kKeyDelete = 1u << 7,
  kKeyNotKey = 1u << 8,
  kKeyIncomplete = 1u << 9,
  kKeyVariableFlags = 1u << 10,  // the flags of a given call depend on its arguments
};

// One key spec with an index begin_search and a range find_keys.
struct KeySpec {
  int begin;    // argument index of the first key
  int lastkey;  // relative to begin (0: one key); negative: from the end (-1: the last argument)
  int step;
  uint32_t flags;  // KeySpecFlag bits
};

// The command's key specs (empty for a command without keys).
std::vector<KeySpec> KeySpecsOf(const CommandSpec& s);

// The flags of the key at argument index `pos` of the command line `cmd`
// (cmd[0] is the command name), as GETKEYSANDFLAGS reports them: the spec
// that covers it, or for a command with variable flags what these arguments
// make it (SET: `OW update`, with GET `RW access update`).
uint32_t KeyFlagsAt(const CommandSpec& s, std::span<const std::string_view> cmd, int pos);

// What an ACL check asks of the key at argument `pos` of `cmd`, by Redis 7.0's
// rule: read permission for an `access` key, write permission for an
// `insert`, `update` or `delete` one, both, or neither (0: a key the command
// only tests, as EXISTS or TYPE: a pattern of either kind will do). Bit 1 is
// read, bit 2 write (server/acl.h's kAclPermRead, kAclPermWrite); -1 when the
// command is not one of Redis's (pion's own commands keep their own rule).
int RedisKeyPermAt(const CommandSpec& s, std::span<const std::string_view> cmd, int pos);

// Redis's names of the set bits ("RW", "access", ...), in Redis's order.
std::vector<std::string_view> KeySpecFlagNames(uint32_t flags);

}  // namespace pion::server
