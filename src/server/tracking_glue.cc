// Server::TrackCommandSlow: which keys of a command a tracking client read and
// which it modified (server/tracking.h), by the command table's flags and key
// specs.
#include <vector>

#include "server/commands/key_specs.h"
#include "server/server.h"

namespace pion::server {

void Server::TrackCommandSlow(std::span<const std::string_view> args, const CommandSpec& spec,
                              const ClientInfo& client, bool failed) {
  const bool read = (spec.flags & kCmdReadonly) != 0;
  const bool write = (spec.flags & kCmdWrite) != 0 && !failed;
  if (!read && !write) return;
  if (read && !(client.tracking.load(std::memory_order_relaxed) & kTrackOn)) return;
  std::vector<int> idx;
  CommandKeyIndexes(spec, args, &idx);
  if (idx.empty()) return;
  std::vector<std::string_view> keys;
  keys.reserve(idx.size());
  for (int i : idx) {
    if (i <= 0 || static_cast<size_t>(i) >= args.size()) continue;
    // A write's read-only keys (COPY's source, BITOP's sources) are not modified.
    if (write && (KeyFlagsAt(spec, args, i) & kKeyRo)) continue;
    keys.push_back(args[static_cast<size_t>(i)]);
  }
  if (read) {
    tracking_.RememberKeys(client, keys);
    return;
  }
  for (std::string_view k : keys) tracking_.InvalidateKey(k, client.id);
}

}  // namespace pion::server
