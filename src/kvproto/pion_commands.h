// pion's own commands (KV.PREFIX.*, KV.BLOCK.*, V.*, PION.*, ATTEND.PREFIX.*),
// described once: what COMMAND INFO and COMMAND DOCS report, what ACL checks,
// and how the Redis module registers them. pion-server's command files pair a
// row with its handler by name (server/commands/command.h, AddPionCommands),
// which copies the row into the server's CommandSpec (group "pion", version and
// grammar included, for COMMAND DOCS); the module registers every row marked
// for it (module/commands.cc). Adding a pion command is a row here plus a handler
// in each place that serves it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvproto/command_flags.h"

namespace pion::server {

// How the Redis module registers a row, where it differs from the server.
enum class ModuleForm : uint8_t {
  kAbsent,      // not in the module
  kSame,        // the row's key positions
  kNoKeys,      // keys 0 0 0 (KV.PREFIX.INFO: its one key is optional)
  kGetkeysApi,  // keys 0 0 0 and "getkeys-api" (KV.BLOCK.MATCH: numkeys)
  kOnly,        // the module's alone (PION.LOADROWS, what its AOF rewrite emits)
};

struct PionCommandRow {
  const char* name;  // upper case
  int arity;         // Redis convention: >0 exact, <0 at least -arity (name included)
  uint32_t flags;    // CommandFlags
  int first_key, last_key, key_step;
  uint32_t acl_categories;  // AclCategory bits beyond those the flags imply
  uint32_t acl_key_flags;   // AclKeyFlags
  const char* summary;      // one line
  const char* since;        // first pion version
  const char* syntax;       // COMMAND DOCS grammar (server/commands/command_docs.h)
  ModuleForm module;
};

// Every row, in the order COMMAND lists them.
std::span<const PionCommandRow> PionCommandRows();
// The row named `name` (upper case), or nullptr.
const PionCommandRow* FindPionCommandRow(std::string_view name);
// The module's flag string for a row ("write deny-oom", "readonly fast
// getkeys-api"): write, readonly, deny-oom and fast from the flags.
std::string ModuleCommandFlags(const PionCommandRow& row);

}  // namespace pion::server
