// ACL channel rules (Redis 7.0): &<pattern>, allchannels (&*), resetchannels,
// and the checks PUBLISH, SPUBLISH and the subscribe commands ask of them
// (docs/security.md "Pub/Sub channels").
#include <algorithm>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/acl.h"

namespace pion::server {

bool AclApplyChannelRule(AclUser* u, std::string_view rule, Status* st) {
  *st = Status::OK();
  if (EqualsIgnoreCase(rule, "allchannels") || rule == "&*") {
    u->allchannels = true;
    u->channels.clear();
    return true;
  }
  if (EqualsIgnoreCase(rule, "resetchannels")) {
    u->allchannels = false;
    u->channels.clear();
    return true;
  }
  if (rule.empty() || rule[0] != '&') return false;
  if (u->allchannels) {
    *st = Status::InvalidArgument(AclSetUserError(rule, kErrAclChannelAfterAll));
    return true;
  }
  std::string_view glob = rule.substr(1);
  if (glob.find_first_of(" \t\r\n") != std::string_view::npos) {
    *st = Status::InvalidArgument(AclSetUserError(rule, kErrAclSyntax));
    return true;
  }
  if (std::find(u->channels.begin(), u->channels.end(), glob) == u->channels.end())
    u->channels.emplace_back(glob);
  return true;
}

bool AclUser::ChannelAllowed(std::string_view channel, bool is_pattern) const {
  if (allchannels) return true;
  for (const std::string& p : channels) {
    // A pattern subscription must be one of the user's patterns, literally.
    if (is_pattern ? p == channel : GlobMatch(p, channel, false)) return true;
  }
  return false;
}

std::string AclUser::ChannelsDescription() const {
  if (allchannels) return "&*";
  std::string s = "resetchannels";
  for (const std::string& p : channels) s += " &" + p;
  return s;
}

bool AclChannelsAllowed(const AclUser& u, const CommandSpec& spec,
                        std::span<const std::string_view> args, std::string_view* denied) {
  const uint32_t kf = spec.acl_key_flags;
  size_t last = (kf & kAclChannelFirst) ? std::min<size_t>(args.size(), 2) : args.size();
  bool pattern = (kf & kAclChannelPatterns) != 0;
  for (size_t i = 1; i < last; ++i) {
    if (!u.ChannelAllowed(args[i], pattern)) {
      *denied = args[i];
      return false;
    }
  }
  return true;
}

bool AclSubscriptionsAllowed(const AclUser& u, const std::vector<std::string>& channels,
                             const std::vector<std::string>& patterns,
                             const std::vector<std::string>& shards) {
  if (u.allchannels) return true;
  for (const std::string& p : patterns)
    if (!u.ChannelAllowed(p, true)) return false;
  for (const std::string& c : channels)
    if (!u.ChannelAllowed(c, false)) return false;
  for (const std::string& c : shards)
    if (!u.ChannelAllowed(c, false)) return false;
  return true;
}

}  // namespace pion::server
