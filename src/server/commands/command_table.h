// CommandTable: every command the server knows (admin commands plus the
// KV.PREFIX / V / PION.STATS families), looked up case-insensitively (ASCII
// A-Z folding only, as Redis). Built once before the workers start; read-only
// afterwards, so any thread may use it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/commands/command.h"

namespace pion::server {

class CommandTable {
 public:
  explicit CommandTable(std::vector<CommandSpec> specs);

  // nullptr when unknown. Names longer than kMaxName bytes are never known.
  const CommandSpec* Find(std::string_view name) const;
  const std::vector<CommandSpec>& specs() const { return specs_; }

  static constexpr size_t kMaxName = 64;

  // Statistics names (INFO commandstats, CLIENT LIST cmd=, MONITOR-free
  // bookkeeping): one per command and one per subcommand its row declares
  // (CommandSpec::subcommands), lower case ("get", "client|list"), numbered
  // densely from 0: the commands in table order, then the subcommands, by
  // parent in table order. The strings live as long as the table.
  size_t num_stat_names() const { return stat_names_.size(); }
  const std::string& stat_name(size_t i) const { return stat_names_[i]; }
  // The statistics slot of a request: its subcommand's when `spec` has
  // documented subcommands and args[1] names one, else the command's.
  size_t StatIndex(const CommandSpec* spec, std::span<const std::string_view> args) const;
  // The command's own slot (no subcommand).
  size_t StatIndex(const CommandSpec* spec) const { return spec_stat_[spec - specs_.data()]; }
  // The subcommands of `spec` as (upper-case name after '|', stat slot).
  const std::vector<std::pair<std::string, size_t>>& subcommands(const CommandSpec* spec) const {
    return subs_[spec - specs_.data()];
  }

 private:
  std::vector<CommandSpec> specs_;
  // Find's table: open addressing over a power-of-two array (at most a quarter
  // full), keyed by a case-folding FNV-1a hash computed in the same pass that
  // upper-cases the name (std::unordered_map hashed and compared separately:
  // ~200 instructions of a 20-byte KV.PREFIX.MEMBERSHIP lookup). A candidate
  // is confirmed word by word against its name zero-padded to whole 8-byte
  // words (`words` indexes name_words_), which the compiler keeps inline
  // where a memcmp of a run-time length is a library call.
  struct NameSlot {
    const CommandSpec* spec = nullptr;
    uint64_t hash = 0;
    uint32_t len = 0;
    uint32_t words = 0;
  };
  static constexpr size_t kNameWords = kMaxName / 8;
  // Upper-cases `name` into `upper` (kNameWords words; the bytes after the
  // name, up to its last word's end, become zero) and returns its hash.
  static uint64_t HashUpper(std::string_view name, uint64_t* upper);
  std::vector<NameSlot> by_name_;
  std::vector<uint64_t> name_words_;
  size_t name_mask_ = 0;
  std::vector<std::string> stat_names_;
  std::vector<size_t> spec_stat_;                                  // by spec index
  std::vector<std::vector<std::pair<std::string, size_t>>> subs_;  // by spec index
};

// The connection and admin commands (commands/connection.cc, client.cc,
// admin.cc, info.cc).
void AddConnectionCommands(std::vector<CommandSpec>* out);
void AddClientCommands(std::vector<CommandSpec>* out);
void AddAdminCommands(std::vector<CommandSpec>* out);
void AddInfoCommands(std::vector<CommandSpec>* out);
// SLOWLOG, LATENCY, MONITOR, ROLE, LASTSAVE (commands/observe.cc).
void AddObserveCommands(std::vector<CommandSpec>* out);
// MEMORY and MODULE (commands/memory.cc), LOLWUT (commands/lolwut.cc).
void AddMemoryCommands(std::vector<CommandSpec>* out);
void AddLolwutCommands(std::vector<CommandSpec>* out);
// SAVE, BGSAVE, BGREWRITEAOF (commands/save.cc).
void AddSaveCommands(std::vector<CommandSpec>* out);

// One CLIENT LIST line for `c` (client.cc); the client registry must be locked.
// `running_bytes`: for the client running the command, the command's own
// bytes, which Redis counts in its query buffer (qbuf, tot-mem) while it runs.
void AppendClientLine(const ClientInfo& c, std::string* out, uint64_t running_bytes = 0);

// The ACL commands (commands/acl.cc).
void AddAclCommands(std::vector<CommandSpec>* out);
// CLUSTER, READONLY, READWRITE (commands/cluster.cc; --cluster-emulated).
void AddClusterCommands(std::vector<CommandSpec>* out);

// The full table: admin commands first, then the data families.
std::vector<CommandSpec> AllCommands();

}  // namespace pion::server
