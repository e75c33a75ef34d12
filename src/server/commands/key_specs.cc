// Key specs: see key_specs.h.
#include "server/commands/key_specs.h"

#include <iterator>
#include <unordered_map>

#include "base/strutil.h"

namespace pion::server {

namespace {

constexpr uint32_t kRoAccess = kKeyRo | kKeyAccess;
constexpr uint32_t kRwAccessUpdate = kKeyRw | kKeyAccess | kKeyUpdate;
constexpr uint32_t kOwUpdate = kKeyOw | kKeyUpdate;
constexpr uint32_t kOwInsert = kKeyOw | kKeyInsert;
constexpr uint32_t kRwUpdate = kKeyRw | kKeyUpdate;

struct NamedSpec {
  std::string_view name;
  KeySpec spec;
};

// Redis 7.0's key specs (src/commands/*.json) of the Redis commands pion has
// or may have; a command with two specs has two rows, in Redis's order.
constexpr NamedSpec kRedisSpecs[] = {
    {"APPEND", {1, 0, 1, kKeyRw | kKeyInsert}},
    {"BITCOUNT", {1, 0, 1, kRoAccess}},
    {"BITFIELD", {1, 0, 1, kRwAccessUpdate | kKeyVariableFlags}},
    {"BITFIELD_RO", {1, 0, 1, kRoAccess}},
    {"BITOP", {2, 0, 1, kOwUpdate}},
    {"BITOP", {3, -1, 1, kRoAccess}},
    {"BITPOS", {1, 0, 1, kRoAccess}},
    {"COPY", {1, 0, 1, kRoAccess}},
    {"COPY", {2, 0, 1, kOwUpdate}},
    {"DECR", {1, 0, 1, kRwAccessUpdate}},
    {"DECRBY", {1, 0, 1, kRwAccessUpdate}},
    {"DEL", {1, -1, 1, kKeyRm | kKeyDelete}},
    {"DUMP", {1, 0, 1, kRoAccess}},
    {"EXISTS", {1, -1, 1, kKeyRo}},
    {"EXPIRE", {1, 0, 1, kRwUpdate}},
    {"EXPIREAT", {1, 0, 1, kRwUpdate}},
    {"EXPIRETIME", {1, 0, 1, kRoAccess}},
    {"GET", {1, 0, 1, kRoAccess}},
    {"GETBIT", {1, 0, 1, kRoAccess}},
    {"GETDEL", {1, 0, 1, kKeyRw | kKeyAccess | kKeyDelete}},
    {"GETEX", {1, 0, 1, kRwAccessUpdate}},
    {"GETRANGE", {1, 0, 1, kRoAccess}},
    {"GETSET", {1, 0, 1, kRwAccessUpdate}},
    {"INCR", {1, 0, 1, kRwAccessUpdate}},
    {"INCRBY", {1, 0, 1, kRwAccessUpdate}},
    {"INCRBYFLOAT", {1, 0, 1, kRwAccessUpdate}},
    {"LCS", {1, 1, 1, kRoAccess}},
    {"MEMORY", {2, 0, 1, kKeyRo}},  // MEMORY USAGE key
    {"MGET", {1, -1, 1, kRoAccess}},
    {"MSET", {1, -1, 2, kOwUpdate}},
    {"MSETNX", {1, -1, 2, kOwInsert}},
    {"OBJECT", {2, 0, 1, kKeyRo}},  // OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key
    {"PERSIST", {1, 0, 1, kRwUpdate}},
    {"PEXPIRE", {1, 0, 1, kRwUpdate}},
    {"PEXPIREAT", {1, 0, 1, kRwUpdate}},
    {"PEXPIRETIME", {1, 0, 1, kRoAccess}},
    {"PSETEX", {1, 0, 1, kOwUpdate}},
    {"PTTL", {1, 0, 1, kRoAccess}},
    {"RENAME", {1, 0, 1, kKeyRw | kKeyAccess | kKeyDelete}},
    {"RENAME", {2, 0, 1, kOwUpdate}},
    {"RENAMENX", {1, 0, 1, kKeyRw | kKeyAccess | kKeyDelete}},
    {"RENAMENX", {2, 0, 1, kOwInsert}},
    {"RESTORE", {1, 0, 1, kOwUpdate}},
    {"SET", {1, 0, 1, kRwAccessUpdate | kKeyVariableFlags}},
    {"SETBIT", {1, 0, 1, kRwAccessUpdate}},
    {"SETEX", {1, 0, 1, kOwUpdate}},
    {"SETNX", {1, 0, 1, kOwInsert}},
    {"SETRANGE", {1, 0, 1, kRwUpdate}},
    {"STRLEN", {1, 0, 1, kKeyRo}},
    {"SUBSTR", {1, 0, 1, kRoAccess}},
    {"TOUCH", {1, -1, 1, kKeyRo}},
    {"TTL", {1, 0, 1, kRoAccess}},
    {"TYPE", {1, 0, 1, kKeyRo}},
    {"UNLINK", {1, -1, 1, kKeyRm | kKeyDelete}},
    {"WATCH", {1, -1, 1, kKeyRo}},
};

// The last argument index a spec covers in a call of `argc` arguments.
int LastIndex(const KeySpec& k, int argc) {
  return k.lastkey >= 0 ? k.begin + k.lastkey : argc + k.lastkey;
}

bool Covers(const KeySpec& k, int argc, int pos) {
  int step = k.step > 0 ? k.step : 1;
  return pos >= k.begin && pos <= LastIndex(k, argc) && (pos - k.begin) % step == 0;
}

// Redis's getkeys procedures for the commands whose flags vary (setGetKeys,
// bitfieldGetKeys).
uint32_t VariableFlags(std::string_view name, std::span<const std::string_view> cmd) {
  const size_t argc = cmd.size();
  if (name == "SET") {
    for (size_t i = 3; i < argc; ++i)
      if (EqualsIgnoreCase(cmd[i], "GET")) return kRwAccessUpdate;
    return kOwUpdate;
  }
  // BITFIELD: read-only while every operation is a GET (or OVERFLOW).
  for (size_t i = 2; i < argc; ++i) {
    size_t rest = argc - i - 1;
    if (EqualsIgnoreCase(cmd[i], "GET") && rest >= 2) {
      i += 2;
    } else if (EqualsIgnoreCase(cmd[i], "OVERFLOW") && rest >= 1) {
      i += 1;
    } else {
      return kRwAccessUpdate;  // SET, INCRBY, or a syntax error: assume a write
    }
  }
  return kRoAccess;
}

}  // namespace

std::vector<KeySpec> KeySpecsOf(const CommandSpec& s) {
  std::vector<KeySpec> out;
  std::string_view name = s.name;
  for (const NamedSpec& r : kRedisSpecs)
    if (r.name == name) out.push_back(r.spec);
  if (!out.empty() || s.first_key <= 0) return out;
  const bool write = s.flags & kCmdWrite;
  out.push_back({s.first_key, s.last_key < 0 ? s.last_key : s.last_key - s.first_key, s.key_step,
                 write ? kRwAccessUpdate : kRoAccess});
  return out;
}

uint32_t KeyFlagsAt(const CommandSpec& s, std::span<const std::string_view> cmd, int pos) {
  const int argc = static_cast<int>(cmd.size());
  for (const KeySpec& k : KeySpecsOf(s)) {
    if (!Covers(k, argc, pos)) continue;
    if (k.flags & kKeyVariableFlags) return VariableFlags(s.name, cmd);
    return k.flags;
  }
  return (s.flags & kCmdWrite) ? kRwAccessUpdate : kRoAccess;
}

int RedisKeyPermAt(const CommandSpec& s, std::span<const std::string_view> cmd, int pos) {
  // Each command's rows of kRedisSpecs (contiguous), found once per name.
  struct Rows {
    size_t begin, end;
  };
  static const std::unordered_map<std::string_view, Rows> kIndex = [] {
    std::unordered_map<std::string_view, Rows> m;
    for (size_t i = 0; i < std::size(kRedisSpecs); ++i) {
      auto [it, fresh] = m.try_emplace(kRedisSpecs[i].name, Rows{i, i + 1});
      if (!fresh) it->second.end = i + 1;
    }
    return m;
  }();
  auto it = kIndex.find(std::string_view(s.name));
  if (it == kIndex.end()) return -1;
  const int argc = static_cast<int>(cmd.size());
  uint32_t flags = 0;
  for (size_t i = it->second.begin; i < it->second.end; ++i) {
    const KeySpec& k = kRedisSpecs[i].spec;
    if (!Covers(k, argc, pos)) continue;
    flags = (k.flags & kKeyVariableFlags) ? VariableFlags(s.name, cmd) : k.flags;
    break;
  }
  int perm = 0;
  if (flags & kKeyAccess) perm |= 1;
  if (flags & (kKeyInsert | kKeyUpdate | kKeyDelete)) perm |= 2;
  return perm;
}

std::vector<std::string_view> KeySpecFlagNames(uint32_t flags) {
  static constexpr std::string_view kNames[] = {
      "RO",     "RW",     "OW",      "RM",         "access",         "update",
      "insert", "delete", "not_key", "incomplete", "variable_flags",
  };
  std::vector<std::string_view> out;
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (flags & (1u << i)) out.push_back(kNames[i]);
  return out;
}

}  // namespace pion::server
