#include "server/commands/command_table.h"

#include <cstring>

#include "base/check.h"
#include "base/strutil.h"
#include "server/commands/command_docs.h"

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
  spec_stat_.resize(specs_.size());
  subs_.resize(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    spec_stat_[i] = stat_names_.size();
    stat_names_.push_back(ToLower(specs_[i].name));
  }
  for (const CommandDoc& d : CommandDocs()) {
    std::string_view n = d.name;
    size_t bar = n.find('|');
    if (bar == std::string_view::npos) continue;
    const CommandSpec* parent = Find(n.substr(0, bar));
    if (parent == nullptr) continue;
    subs_[parent - specs_.data()].emplace_back(std::string(n.substr(bar + 1)), stat_names_.size());
    stat_names_.push_back(ToLower(n));
  }
}

size_t CommandTable::StatIndex(const CommandSpec* spec,
                               std::span<const std::string_view> args) const {
  size_t i = spec - specs_.data();
  if (args.size() >= 2 && !subs_[i].empty()) {
    for (const auto& [sub, slot] : subs_[i])
      if (EqualsIgnoreCase(args[1], sub)) return slot;
  }
  return spec_stat_[i];
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
  AddObserveCommands(&v);
  AddAclCommands(&v);
  AddKvPrefixCommands(&v);
  AddVStoreCommands(&v);
  AddStatsCommands(&v);
  AddAttendCommands(&v);
  AddStringCommands(&v);
  AddTransactionCommands(&v);
  return v;
}

}  // namespace pion::server
