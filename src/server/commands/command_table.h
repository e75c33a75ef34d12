// CommandTable: every command the server knows (admin commands plus the
// KV.PREFIX / V / PION.STATS families), looked up case-insensitively (ASCII
// A-Z folding only, as Redis). Built once before the workers start; read-only
// afterwards, so any thread may use it.
#pragma once

#include <string_view>
#include <unordered_map>
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

 private:
  std::vector<CommandSpec> specs_;
  std::unordered_map<std::string_view, const CommandSpec*> by_name_;
};

// The connection and admin commands (commands/connection.cc, client.cc,
// admin.cc, info.cc).
void AddConnectionCommands(std::vector<CommandSpec>* out);
void AddClientCommands(std::vector<CommandSpec>* out);
void AddAdminCommands(std::vector<CommandSpec>* out);
void AddInfoCommands(std::vector<CommandSpec>* out);
// CLUSTER, READONLY, READWRITE (commands/cluster.cc; --cluster-emulated).
void AddClusterCommands(std::vector<CommandSpec>* out);
// INFO's "# Cluster" section: cluster_enabled:1 with --cluster-emulated, else 0.
void ClusterInfoSection(Server& s, int worker, std::string* out);

// The full table: admin commands first, then the data families.
std::vector<CommandSpec> AllCommands();

}  // namespace pion::server
