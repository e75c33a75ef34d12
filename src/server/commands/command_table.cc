#include "server/commands/command_table.h"

#include <optional>

#include "base/check.h"
#include "base/strutil.h"
#include "kvproto/pion_commands.h"

namespace pion::server {

namespace {
// The whole 8-byte words a name of `len` bytes spans (its padded form's size).
constexpr size_t WordsFor(size_t len) { return (len + 7) / 8; }
}  // namespace

CommandTable::CommandTable(std::vector<CommandSpec> specs) : specs_(std::move(specs)) {
  size_t cap = 16;
  while (cap < specs_.size() * 4) cap *= 2;
  by_name_.resize(cap);
  name_mask_ = cap - 1;
  for (const CommandSpec& s : specs_) {
    std::string_view name(s.name);
    PION_CHECK_MSG(name.size() <= kMaxName, s.name);
    for (char c : name) PION_CHECK_MSG(!(c >= 'a' && c <= 'z'), "command names are upper case");
    PION_CHECK_MSG(Find(name) == nullptr, s.name);  // each name once
    uint64_t upper[kNameWords];
    const uint64_t h = HashUpper(name, upper);
    size_t i = h & name_mask_;
    while (by_name_[i].spec != nullptr) i = (i + 1) & name_mask_;
    by_name_[i] = NameSlot{&s, h, static_cast<uint32_t>(name.size()),
                           static_cast<uint32_t>(name_words_.size())};
    name_words_.insert(name_words_.end(), upper, upper + WordsFor(name.size()));
  }
  spec_stat_.resize(specs_.size());
  subs_.resize(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    spec_stat_[i] = stat_names_.size();
    stat_names_.push_back(ToLower(specs_[i].name));
  }
  for (size_t i = 0; i < specs_.size(); ++i) {
    for (const SubcommandDoc& sub : specs_[i].subcommands) {
      subs_[i].emplace_back(sub.name, stat_names_.size());
      stat_names_.push_back(stat_names_[spec_stat_[i]] + "|" + ToLower(sub.name));
    }
  }
}

void AddPionCommands(std::span<const PionHandler> handlers, std::vector<CommandSpec>* out) {
  for (const PionHandler& h : handlers) {
    const PionCommandRow* r = FindPionCommandRow(h.name);
    PION_CHECK_MSG(r != nullptr && r->module != ModuleForm::kOnly, h.name);
    CommandSpec s{r->name,   r->arity,   r->flags, r->first_key, r->last_key, r->key_step,
                  h.handler, r->summary, "pion",   r->since,     r->syntax};
    s.acl_categories = r->acl_categories;
    s.acl_key_flags = r->acl_key_flags;
    out->push_back(s);
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

uint64_t CommandTable::HashUpper(std::string_view name, uint64_t* upper) {
  if (!name.empty()) upper[WordsFor(name.size()) - 1] = 0;  // the padding of the last word
  // Bytes written through a char pointer: char may alias the words.
  char* out = reinterpret_cast<char*>(upper);
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
    out[i] = c;
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  return h;
}

const CommandSpec* CommandTable::Find(std::string_view name) const {
  if (name.size() > kMaxName) return nullptr;
  uint64_t buf[kNameWords];
  const uint64_t h = HashUpper(name, buf);
  const size_t n = WordsFor(name.size());
  for (size_t i = h & name_mask_;; i = (i + 1) & name_mask_) {
    const NameSlot& s = by_name_[i];
    if (s.spec == nullptr) return nullptr;
    if (s.hash != h || s.len != name.size()) continue;
    const uint64_t* w = name_words_.data() + s.words;
    size_t k = 0;
    while (k < n && w[k] == buf[k]) ++k;
    if (k == n) return s.spec;
  }
}

void CommandKeyIndexes(const CommandSpec& spec, std::span<const std::string_view> args,
                       std::vector<int>* out) {
  out->clear();
  const int argc = static_cast<int>(args.size());
  if (spec.first_key <= 0) return;
  int first = spec.first_key;
  int last = spec.last_key < 0 ? argc + spec.last_key : spec.last_key;
  int step = spec.key_step > 0 ? spec.key_step : 1;
  if (spec.acl_key_flags & kAclKeyNumkeys) {
    auto n = first - 1 < argc ? ParseInt64Strict(args[first - 1]) : std::nullopt;
    last = (n && *n > 0 && *n <= argc) ? first + static_cast<int>(*n) - 1 : first - 1;
  }
  if (spec.acl_key_flags & kAclKeyChain) {
    const size_t f = ChainFirstKey(args);
    if (f == 0) return;
    for (size_t i = 1; i + 1 < f; i += 2)
      if (EqualsIgnoreCase(args[i], "AFTER")) out->push_back(static_cast<int>(i + 1));
    first = static_cast<int>(f);
    last = argc - 2;
    step = 2;
  }
  if (last >= argc) last = argc - 1;
  for (int i = first; i <= last; i += step) out->push_back(i);
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
  AddKeyCommands(&v);
  AddMemoryCommands(&v);
  AddLolwutCommands(&v);
  AddSaveCommands(&v);
  AddCounterCommands(&v);
  AddStringEditCommands(&v);
  AddBitCommands(&v);
  AddKeyObjectCommands(&v);
  AddDumpRestoreCommands(&v);
  AddKvBlockCommands(&v);
  AddTransactionCommands(&v);
  AddPubSubCommands(&v);
  AddClusterCommands(&v);
  return v;
}

}  // namespace pion::server
