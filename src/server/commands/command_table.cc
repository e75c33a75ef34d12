#include "server/commands/command_table.h"

#include <cstring>

#include "base/check.h"

namespace pion::server {

CommandTable::CommandTable(std::vector<CommandSpec> specs) : specs_(std::move(specs)) {
  by_name_.reserve(specs_.size() * 2);
  for (const CommandSpec& s : specs_) {
    std::string_view name(s.name);
    PION_CHECK_MSG(name.size() <= kMaxName, s.name);
    for (char c : name) PION_CHECK_MSG(!(c >= 'a' && c <= 'z'), "command names are upper case");
    bool inserted = by_name_.emplace(name, &s).second;
    PION_CHECK_MSG(inserted, s.name);
  }
}

const CommandSpec* CommandTable::Find(std::string_view name) const {
  if (name.size() > kMaxName) return nullptr;
  char buf[kMaxName];
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    buf[i] = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
  }
  auto it = by_name_.find(std::string_view(buf, name.size()));
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<CommandSpec> AllCommands() {
  std::vector<CommandSpec> v;
  AddConnectionCommands(&v);
  AddClientCommands(&v);
  AddAdminCommands(&v);
  AddInfoCommands(&v);
  AddKvPrefixCommands(&v);
  AddVStoreCommands(&v);
  AddStatsCommands(&v);
  AddAttendCommands(&v);
  AddStringCommands(&v);
  AddTransactionCommands(&v);
  return v;
}

}  // namespace pion::server
