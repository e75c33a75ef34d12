#include "server/acl.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/commands/command_table.h"
#include "server/commands/key_specs.h"

namespace pion::server {

namespace {

constexpr const char* kCategoryNames[] = {
    "keyspace",   "read",        "write",     "set",         "sortedset", "list",
    "hash",       "string",      "bitmap",    "hyperloglog", "geo",       "stream",
    "pubsub",     "admin",       "fast",      "slow",        "blocking",  "dangerous",
    "connection", "transaction", "scripting", "kvcache",     "attend"};

bool IsLowerHex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

uint32_t CommandCategories(const CommandSpec& s) {
  uint32_t c = s.acl_categories;
  if (s.flags & kCmdWrite) c |= kAclWrite;
  if (s.flags & kCmdReadonly) c |= kAclRead;
  if (s.flags & kCmdAdmin) c |= kAclAdmin | kAclDangerous;
  c |= (s.flags & kCmdFast) ? kAclFast : kAclSlow;
  return c;
}

uint32_t SubcommandCategories(const CommandSpec& s, std::string_view sub) {
  uint32_t c = CommandCategories(s);
  if (std::string_view(s.name) == "CLIENT" &&
      (sub == "KILL" || sub == "LIST" || sub == "NO-EVICT" || sub == "PAUSE" || sub == "UNBLOCK" ||
       sub == "UNPAUSE"))
    c |= kAclAdmin | kAclDangerous;
  return c;
}

std::span<const char* const> AclCategoryNames() { return kCategoryNames; }

uint32_t AclCategoryBit(std::string_view name) {
  for (size_t i = 0; i < std::size(kCategoryNames); ++i)
    if (EqualsIgnoreCase(name, kCategoryNames[i])) return 1u << i;
  return 0;
}

std::string_view AclKeyOwner(std::string_view key) {
  for (std::string_view suffix : {"_pk", "_pv", "_attn"})
    if (key.size() > suffix.size() && key.ends_with(suffix))
      return key.substr(0, key.size() - suffix.size());
  return key;
}

std::vector<std::string> AclVisibleKeys(const AclUser* u, std::vector<std::string> names,
                                        uint8_t perm) {
  if (u != nullptr && u->allkeys) return names;
  std::vector<std::string> out;
  if (u == nullptr) return out;
  for (std::string& n : names)
    if (u->KeyAllowed(n, perm)) out.push_back(std::move(n));
  return out;
}

std::string AclHashPassword(std::string_view password) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(password.data()), password.size(), md);
  static const char kHex[] = "0123456789abcdef";
  std::string out(2 * SHA256_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

bool AclUser::KeyAllowed(std::string_view key, uint8_t perm) const {
  if (allkeys) return true;
  if (perm == 0) {  // neither read nor written: any pattern that matches
    for (const AclKeyPattern& p : keys)
      if (GlobMatch(p.glob, key, false)) return true;
    return false;
  }
  // Each permission may come from a different pattern (%R~a* %W~a*).
  uint8_t have = 0;
  for (const AclKeyPattern& p : keys) {
    if ((p.perm & perm & ~have) == 0) continue;
    if (GlobMatch(p.glob, key, false)) have |= p.perm;
    if ((have & perm) == perm) return true;
  }
  return false;
}

std::string AclUser::KeysDescription() const {
  if (allkeys) return "~*";
  std::string s;
  for (const AclKeyPattern& p : keys) {
    if (!s.empty()) s += ' ';
    if (p.perm == kAclPermRead)
      s += "%R";
    else if (p.perm == kAclPermWrite)
      s += "%W";
    s += '~';
    s += p.glob;
  }
  return s;
}

std::string AclUser::CommandsDescription() const {
  std::string s;
  if (cmd_rules.empty() || cmd_rules.front() != "+@all") s = "-@all";
  for (const std::string& r : cmd_rules) {
    if (!s.empty()) s += ' ';
    s += r;
  }
  return s;
}

std::string AclUser::PermissionsDescription() const {
  std::string s = KeysDescription();
  if (!s.empty()) s += ' ';
  s += ChannelsDescription();
  s += ' ';
  s += CommandsDescription();
  return s;
}

std::string AclUser::Describe() const {
  std::string s = enabled ? "on" : "off";
  if (nopass) s += " nopass";
  for (const std::string& p : passwords) s += " #" + p;
  s += " " + PermissionsDescription();
  for (const auto& sel : selectors) s += " (" + sel->PermissionsDescription() + ")";
  return s;
}

Acl::Acl(const CommandTable* commands) : commands_(commands), ncommands_(commands->specs().size()) {
  auto def = std::make_shared<AclUser>();
  def->name = "default";
  InitCommandRules(def.get());
  std::string_view rules[] = {"on", "nopass", "~*", "&*", "+@all"};
  Status st = ApplyRuleForInit(def.get(), rules);
  (void)st;
  users_.emplace("default", std::move(def));
}

Status Acl::ApplyRuleForInit(AclUser* u, std::span<const std::string_view> rules) const {
  for (std::string_view r : rules) {
    Status st = ApplyRule(u, r);
    if (!st.ok()) return st;
  }
  Finish(u);
  return Status::OK();
}

Status Acl::ApplyRule(AclUser* u, std::string_view rule) const {
  auto fail = [&](std::string_view why) {
    return Status::InvalidArgument(AclSetUserError(rule, why));
  };
  if (EqualsIgnoreCase(rule, "on")) {
    u->enabled = true;
  } else if (EqualsIgnoreCase(rule, "off")) {
    u->enabled = false;
  } else if (EqualsIgnoreCase(rule, "nopass")) {
    u->nopass = true;
    u->passwords.clear();
  } else if (EqualsIgnoreCase(rule, "resetpass")) {
    u->nopass = false;
    u->passwords.clear();
  } else if (rule.size() >= 2 && rule.front() == '(' && rule.back() == ')') {
    return AddSelector(u, rule);
  } else if (EqualsIgnoreCase(rule, "clearselectors")) {
    u->selectors.clear();
  } else if (EqualsIgnoreCase(rule, "reset")) {
    u->selectors.clear();
    u->enabled = false;
    u->nopass = false;
    u->passwords.clear();
    u->allkeys = false;
    u->keys.clear();
    u->allchannels = pubsub_default_all();
    u->channels.clear();
    SetAllCommands(u, false);
    u->cmd_rules.clear();
  } else if (!rule.empty() && (rule[0] == '>' || rule[0] == '#')) {
    std::string h;
    if (rule[0] == '>') {
      h = AclHashPassword(rule.substr(1));
    } else {
      if (!IsLowerHex(rule.substr(1))) return fail(kErrAclBadHash);
      h = std::string(rule.substr(1));
    }
    if (std::find(u->passwords.begin(), u->passwords.end(), h) == u->passwords.end())
      u->passwords.push_back(h);
    u->nopass = false;
  } else if (!rule.empty() && (rule[0] == '<' || rule[0] == '!')) {
    std::string h;
    if (rule[0] == '<') {
      h = AclHashPassword(rule.substr(1));
    } else {
      if (!IsLowerHex(rule.substr(1))) return fail(kErrAclBadHash);
      h = std::string(rule.substr(1));
    }
    auto it = std::find(u->passwords.begin(), u->passwords.end(), h);
    if (it == u->passwords.end()) return fail(kErrAclNoSuchPassword);
    u->passwords.erase(it);
  } else {
    return ApplyPermissionRule(u, rule);
  }
  return Status::OK();
}

Status Acl::ApplyPermissionRule(AclUser* u, std::string_view rule) const {
  auto fail = [&](std::string_view why) {
    return Status::InvalidArgument(AclSetUserError(rule, why));
  };
  if (EqualsIgnoreCase(rule, "allkeys")) {
    u->allkeys = true;
    u->keys.clear();
  } else if (EqualsIgnoreCase(rule, "resetkeys")) {
    u->allkeys = false;
    u->keys.clear();
  } else if (Status cst; AclApplyChannelRule(u, rule, &cst)) {
    return cst;
  } else if (EqualsIgnoreCase(rule, "allcommands") || EqualsIgnoreCase(rule, "+@all")) {
    SetAllCommands(u, true);
    u->cmd_rules.assign(1, "+@all");
  } else if (EqualsIgnoreCase(rule, "nocommands") || EqualsIgnoreCase(rule, "-@all")) {
    SetAllCommands(u, false);
    u->cmd_rules.clear();
  } else if (!rule.empty() && (rule[0] == '~' || rule[0] == '%')) {
    if (u->allkeys) return fail(kErrAclKeyAfterAll);
    uint8_t perm = kAclPermRead | kAclPermWrite;
    std::string_view glob = rule.substr(1);
    if (rule[0] == '%') {
      // As Redis: R and W (each at most once), then '~' and the pattern; with
      // no '~' the pattern is empty (no key: "%RW" is accepted as such).
      perm = 0;
      size_t i = 1;
      for (; i < rule.size(); ++i) {
        char c = rule[i];
        if ((c == 'R' || c == 'r') && !(perm & kAclPermRead)) {
          perm |= kAclPermRead;
        } else if ((c == 'W' || c == 'w') && !(perm & kAclPermWrite)) {
          perm |= kAclPermWrite;
        } else if (c == '~') {
          ++i;
          break;
        } else {
          return fail(kErrAclSyntax);
        }
      }
      if (perm == 0) return fail(kErrAclSyntax);
      glob = rule.substr(std::min(i, rule.size()));
    }
    for (char c : glob)
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') return fail(kErrAclSyntax);
    if (glob == "*" && perm == (kAclPermRead | kAclPermWrite)) {
      u->allkeys = true;
      u->keys.clear();
    } else {
      bool merged = false;
      for (AclKeyPattern& p : u->keys) {
        if (p.glob == glob) {
          p.perm |= perm;
          merged = true;
        }
      }
      if (!merged) u->keys.push_back({std::string(glob), perm});
    }
  } else if (rule.size() >= 2 && (rule[0] == '+' || rule[0] == '-')) {
    return ApplyCommandRule(u, rule);
  } else {
    return fail(kErrAclSyntax);
  }
  return Status::OK();
}

Status Acl::AddSelector(AclUser* u, std::string_view op) const {
  // A selector starts with no permissions at all (no commands, keys or
  // channels, whatever acl-pubsub-default says), as in Redis.
  auto sel = std::make_shared<AclUser>();
  sel->enabled = true;
  InitCommandRules(sel.get());
  sel->allchannels = false;
  std::string_view body = op.substr(1, op.size() - 2);
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
    size_t j = i;
    while (j < body.size() && body[j] != ' ' && body[j] != '\t') ++j;
    if (j == i) break;
    std::string_view rule = body.substr(i, j - i);
    Status st = ApplyPermissionRule(sel.get(), rule);
    if (!st.ok()) {
      // The error names the whole selector, as Redis reports it.
      std::string prefix = AclSetUserError(rule, "");
      std::string_view msg = st.message();
      std::string_view why = msg.substr(std::min(msg.size(), prefix.size()));
      return Status::InvalidArgument(AclSetUserError(op, why));
    }
    i = j;
  }
  Finish(sel.get());
  u->selectors.push_back(std::move(sel));
  return Status::OK();
}

void Acl::Finish(AclUser* u) const {
  FinishCommandRules(u);
  bool all = true;
  for (size_t i = 0; i < ncommands_ && all; ++i)
    all = u->CommandAllowed(i) && !u->DecidedBySubcommand(i);
  u->unrestricted = u->enabled && all && u->allkeys && u->allchannels;
  u->full_categories = 0;
  for (size_t b = 0; b < std::size(kCategoryNames); ++b) {
    uint32_t bit = 1u << b;
    bool every = true;
    for (size_t i = 0; i < ncommands_ && every; ++i)
      if (CommandCategories(commands_->specs()[i]) & bit)
        every = u->CommandAllowed(i) && !u->DecidedBySubcommand(i);
    if (every) u->full_categories |= bit;
  }
}

std::shared_ptr<const AclUser> Acl::Find(std::string_view name) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = users_.find(std::string(name));
  return it == users_.end() ? nullptr : it->second;
}

std::shared_ptr<const AclUser> Acl::Authenticate(std::string_view name,
                                                 std::string_view password) const {
  std::shared_ptr<const AclUser> u = Find(name);
  if (u == nullptr || !u->enabled) return nullptr;
  if (u->nopass) return u;
  std::string h = AclHashPassword(password);
  // Every stored hash is compared in full: the time does not depend on which matched.
  unsigned char found = 0;
  for (const std::string& p : u->passwords) {
    unsigned char diff = 0;
    for (size_t i = 0; i < 64; ++i) diff |= static_cast<unsigned char>(p[i] ^ h[i]);
    found |= diff == 0;
  }
  return found ? u : nullptr;
}

Status Acl::SetUserLocked(std::unordered_map<std::string, std::shared_ptr<const AclUser>>* map,
                          std::string_view name, std::span<const std::string_view> rules) const {
  for (char c : name)
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0')
      return Status::InvalidArgument(kErrAclBadUsername);
  auto nu = std::make_shared<AclUser>();
  auto it = map->find(std::string(name));
  if (it != map->end()) {
    *nu = *it->second;
  } else {
    nu->name = std::string(name);
    InitCommandRules(nu.get());
    nu->allchannels = pubsub_default_all();  // acl-pubsub-default
  }
  // A selector written over several arguments ("(" "~k" "+get" ")", as a
  // split ACL file line gives it) is one rule, its parts joined by spaces.
  std::vector<std::string> merged;
  std::string open;
  bool in_selector = false;
  std::string_view open_at;
  for (std::string_view r : rules) {
    if (!in_selector && !r.empty() && r.front() == '(' && r.back() != ')') {
      in_selector = true;
      open_at = r;
      open = std::string(r);
      continue;
    }
    if (in_selector) {
      open += ' ';
      open += r;
      if (!r.empty() && r.back() == ')') {
        in_selector = false;
        merged.push_back(std::move(open));
        open.clear();
      }
      continue;
    }
    merged.emplace_back(r);
  }
  if (in_selector) return Status::InvalidArgument(AclUnmatchedParenthesisError(open_at));
  for (const std::string& r : merged) {
    Status st = ApplyRule(nu.get(), r);
    if (!st.ok()) return st;
  }
  Finish(nu.get());
  (*map)[nu->name] = std::move(nu);
  return Status::OK();
}

Status Acl::SetUser(std::string_view name, std::span<const std::string_view> rules) {
  std::lock_guard<std::mutex> lk(mu_);
  Status st = SetUserLocked(&users_, name, rules);
  if (st.ok()) epoch_.fetch_add(1, std::memory_order_acq_rel);
  return st;
}

Result<int> Acl::DelUsers(std::span<const std::string_view> names) {
  std::lock_guard<std::mutex> lk(mu_);
  for (std::string_view n : names)
    if (n == "default") return Status::InvalidArgument(kErrAclDelDefault);
  int n = 0;
  for (std::string_view name : names) n += static_cast<int>(users_.erase(std::string(name)));
  if (n > 0) epoch_.fetch_add(1, std::memory_order_acq_rel);
  return n;
}

std::vector<std::shared_ptr<const AclUser>> Acl::Users() const {
  std::vector<std::shared_ptr<const AclUser>> v;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [n, u] : users_) v.push_back(u);
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  return v;
}

std::vector<std::string> Acl::ListLines() const {
  std::vector<std::string> out;
  for (const auto& u : Users()) out.push_back("user " + u->name + " " + u->Describe());
  return out;
}

Status Acl::LoadLines(const std::vector<std::string>& lines, std::string_view origin) {
  std::unordered_map<std::string, std::shared_ptr<const AclUser>> fresh;
  std::vector<std::string> seen;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string where = AclFileLinePrefix(origin, i + 1);
    std::vector<std::string_view> toks;
    std::string_view line = lines[i];
    size_t p = 0;
    while (p < line.size()) {
      while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
      size_t q = p;
      while (q < line.size() && line[q] != ' ' && line[q] != '\t') ++q;
      if (q > p) toks.push_back(line.substr(p, q - p));
      p = q;
    }
    if (toks.empty()) continue;
    if (toks.size() < 2 || toks[0] != "user")
      return Status::InvalidArgument(where + std::string(kErrAclFileLine.substr(4)));
    std::string name(toks[1]);
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      return Status::InvalidArgument(where + std::string(kErrAclDuplicateUser.substr(4)));
    seen.push_back(name);
    // Each line describes the whole user: start from nothing.
    std::vector<std::string_view> rules(toks.begin() + 2, toks.end());
    rules.insert(rules.begin(), "reset");
    Status st = SetUserLocked(&fresh, name, rules);
    if (!st.ok()) {
      std::string_view m = st.message();
      if (m.starts_with(kErrCodeWord)) m.remove_prefix(kErrCodeWord.size());
      return Status::InvalidArgument(where + std::string(m));
    }
  }
  if (fresh.find("default") == fresh.end()) {
    std::string_view rules[] = {"on", "nopass", "~*", "&*", "+@all"};
    Status st = SetUserLocked(&fresh, "default", rules);
    if (!st.ok()) return st;
  }
  std::lock_guard<std::mutex> lk(mu_);
  users_.swap(fresh);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return Status::OK();
}

void Acl::SetDefaultPassword(std::string_view pass) {
  std::string gt = ">" + std::string(pass);
  std::vector<std::string_view> rules = {"resetpass"};
  if (pass.empty())
    rules.push_back("nopass");
  else
    rules.push_back(gt);
  Status st = SetUser("default", rules);
  (void)st;
}

AclDenial Acl::Check(const AclUser& u, const CommandSpec& spec, size_t index,
                     std::span<const std::string_view> args, std::string_view* denied_key) {
  AclDenial d = CheckOne(u, spec, index, args, denied_key);
  if (d == AclDenial::kNone || u.selectors.empty()) [[likely]]
    return d;
  // Allowed when one selector allows it. Otherwise, as Redis, the refusal
  // reported is the most specific one (command < key < channel) and, among
  // equals, the one at the latest argument.
  auto rank = [](AclDenial x) {
    return x == AclDenial::kCommand ? 1 : x == AclDenial::kKey ? 2 : 4;
  };
  auto position = [&](std::string_view item) -> ptrdiff_t {
    for (size_t i = 0; i < args.size(); ++i)
      if (!item.empty() && args[i].data() == item.data()) return static_cast<ptrdiff_t>(i);
    return -1;
  };
  std::string_view best_item = *denied_key;
  for (const auto& sel : u.selectors) {
    std::string_view item;
    AclDenial e = CheckOne(*sel, spec, index, args, &item);
    if (e == AclDenial::kNone) return e;
    if (rank(e) > rank(d) || (rank(e) == rank(d) && position(item) > position(best_item))) {
      d = e;
      best_item = item;
    }
  }
  *denied_key = best_item;
  return d;
}

AclDenial Acl::CheckOne(const AclUser& u, const CommandSpec& spec, size_t index,
                        std::span<const std::string_view> args, std::string_view* denied_key) {
  if (u.unrestricted) return AclDenial::kNone;
  if (!u.CallAllowed(index, spec, args)) return AclDenial::kCommand;
  // Pub/Sub channels (no keys: Redis checks keys first, then channels).
  if (!u.allchannels &&
      (spec.acl_key_flags & (kAclChannelArgs | kAclChannelFirst | kAclChannelPatterns)) != 0) {
    if (!AclChannelsAllowed(u, spec, args, denied_key)) return AclDenial::kChannel;
    return AclDenial::kNone;
  }
  if (u.allkeys || spec.first_key <= 0) return AclDenial::kNone;
  int argc = static_cast<int>(args.size());
  int last = spec.last_key < 0 ? argc + spec.last_key : spec.last_key;
  if (last >= argc) last = argc - 1;
  int step = spec.key_step > 0 ? spec.key_step : 1;
  const uint32_t kf = spec.acl_key_flags;
  if (kf & (kAclKeyNumkeys | kAclKeyChain)) {
    // Key positions that depend on the arguments (KV.BLOCK.MATCH, CHAIN).
    thread_local std::vector<int> idx;
    CommandKeyIndexes(spec, args, &idx);
    const uint8_t p = (spec.flags & kCmdWrite) ? kAclPermWrite : kAclPermRead;
    for (int i : idx)
      if (!u.KeyAllowed(args[i], p)) {
        *denied_key = args[i];
        return AclDenial::kKey;
      }
    return AclDenial::kNone;
  }
  uint8_t perm = (kf & kAclKeyReadOnly)        ? kAclPermRead
                 : (spec.flags & kCmdWrite)    ? kAclPermWrite
                 : (spec.flags & kCmdReadonly) ? kAclPermRead
                                               : (kAclPermRead | kAclPermWrite);
  if (kf & kAclKeyAccess) perm |= kAclPermRead;
  if (kf & kAclKeyAccessIfGet) {
    for (size_t i = 3; i < args.size(); ++i)
      if (EqualsIgnoreCase(args[i], "GET")) perm |= kAclPermRead;
  }
  // Redis's commands: each key's permission from its key spec (COPY reads its
  // source and writes its destination; EXISTS needs either; BITFIELD with only
  // GETs reads). pion's own commands: the rule above.
  const bool redis_specs =
      !(kf & kAclKeyNamespace) && RedisKeyPermAt(spec, args, spec.first_key) >= 0;
  for (int i = spec.first_key; i <= last; i += step) {
    std::string_view key = args[i];
    if (kf & kAclKeyNamespace) key = AclKeyOwner(key);
    const uint8_t need = redis_specs ? static_cast<uint8_t>(RedisKeyPermAt(spec, args, i)) : perm;
    bool ok = u.KeyAllowed(key, need);
    if (ok && (kf & kAclKeyAlsoOwner) && AclKeyOwner(key) != key)
      ok = u.KeyAllowed(AclKeyOwner(key), need);
    if (!ok) {
      *denied_key = args[i];
      return AclDenial::kKey;
    }
  }
  return AclDenial::kNone;
}

void Acl::Log(std::string_view reason, std::string_view object, std::string_view username,
              std::string client_info, std::string_view context) {
  uint64_t now = MonotonicUs();
  std::lock_guard<std::mutex> lk(mu_);
  // Redis merges an entry that repeats one of the last ten (same reason,
  // context, object and user, updated within 60 s) and moves it to the front.
  constexpr size_t kScan = 10;
  size_t scanned = 0;
  for (auto it = log_.begin(); it != log_.end() && scanned < kScan; ++it, ++scanned) {
    AclLogEntry& e = *it;
    if (now - e.updated_us > 60'000'000) continue;
    if (e.reason == reason && e.context == context && e.object == object &&
        e.username == username) {
      ++e.count;
      e.updated_us = now;
      e.client_info = std::move(client_info);
      if (it != log_.begin()) {
        AclLogEntry moved = std::move(e);
        log_.erase(it);
        log_.push_front(std::move(moved));
      }
      return;
    }
  }
  AclLogEntry e;
  e.reason = std::string(reason);
  e.object = std::string(object);
  e.username = std::string(username);
  e.context = std::string(context);
  e.created_us = e.updated_us = now;
  e.client_info = std::move(client_info);
  log_.push_front(std::move(e));
  while (log_.size() > log_max_len_) log_.pop_back();
}

std::vector<AclLogEntry> Acl::LogEntries(size_t max) const {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = std::min(max, log_.size());
  return std::vector<AclLogEntry>(log_.begin(), log_.begin() + static_cast<ptrdiff_t>(n));
}

void Acl::ResetLog() {
  std::lock_guard<std::mutex> lk(mu_);
  log_.clear();
}

void Acl::set_log_max_len(size_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  log_max_len_ = n;
  while (log_.size() > log_max_len_) log_.pop_back();
}

Result<std::vector<std::string>> ReadAclFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot open ACL file " + path + ": " + std::strerror(errno));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    // Comments and blank lines keep their line number (an empty entry).
    if (first == std::string::npos || line[first] == '#') line.clear();
    lines.push_back(std::move(line));
  }
  return lines;
}

Status WriteAclFile(const std::string& path, const std::vector<std::string>& lines) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("cannot write " + tmp + ": " + std::strerror(errno));
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  size_t off = 0;
  while (off < all.size()) {
    ssize_t n = ::write(fd, all.data() + off, all.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IOError("cannot write " + tmp + ": " + std::strerror(e));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IOError("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::IOError("cannot rename " + tmp + ": " + std::strerror(errno));
  return Status::OK();
}

std::function<bool(std::string_view)> SubtreeWriteCheck(const AclUser* u, std::string* denied) {
  if (u != nullptr && (u->unrestricted || u->allkeys)) return {};
  return [u, denied](std::string_view ns) {
    if (u != nullptr && u->KeyAllowed(ns, kAclPermWrite)) return true;
    if (denied != nullptr) *denied = ns;
    return false;
  };
}

}  // namespace pion::server
