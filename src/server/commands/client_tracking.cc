#include "server/commands/client_tracking.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_info.h"
#include "server/command_env.h"

namespace pion::server {

namespace {
constexpr auto kR = std::memory_order_relaxed;
}  // namespace

// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT]
// [NOLOOP]: Redis's order of checks (the options first, for OFF too).
void ClientTracking(CommandContext& ctx) {
  int64_t redir = 0;
  uint32_t options = 0;
  std::vector<std::string_view> prefixes;
  const size_t n = ctx.args.size();
  for (size_t j = 3; j < n; ++j) {
    std::string_view a = ctx.args[j];
    const bool more = j + 1 < n;
    if (EqualsIgnoreCase(a, "REDIRECT") && more) {
      ++j;
      if (redir != 0) return ctx.reply->Error(kErrTrackingOneRedirect);
      auto id = ParseInt64Strict(ctx.args[j]);
      if (!id.has_value()) return ctx.reply->Error(kErrNotInteger);
      redir = *id;
      bool exists = false;
      ctx.env->clients().WithId(static_cast<uint64_t>(redir),
                                [&](const ClientInfo* c) { exists = c != nullptr; });
      if (redir <= 0 || !exists) return ctx.reply->Error(kErrTrackingNoRedirClient);
    } else if (EqualsIgnoreCase(a, "BCAST")) {
      options |= kTrackBcast;
    } else if (EqualsIgnoreCase(a, "OPTIN")) {
      options |= kTrackOptin;
    } else if (EqualsIgnoreCase(a, "OPTOUT")) {
      options |= kTrackOptout;
    } else if (EqualsIgnoreCase(a, "NOLOOP")) {
      options |= kTrackNoloop;
    } else if (EqualsIgnoreCase(a, "PREFIX") && more) {
      prefixes.push_back(ctx.args[++j]);
    } else {
      return ctx.reply->Error(kErrSyntaxError);
    }
  }
  Tracking& t = ctx.env->tracking();
  if (EqualsIgnoreCase(ctx.args[2], "ON")) {
    const uint32_t cur = ctx.client->tracking.load(kR);
    if (!(options & kTrackBcast) && !prefixes.empty())
      return ctx.reply->Error(kErrTrackingPrefixNeedsBcast);
    if ((cur & kTrackOn) && ((cur & kTrackBcast) != 0) != ((options & kTrackBcast) != 0))
      return ctx.reply->Error(kErrTrackingBcastSwitch);
    if ((options & kTrackBcast) && (options & (kTrackOptin | kTrackOptout)))
      return ctx.reply->Error(kErrTrackingOptBcast);
    if ((options & kTrackOptin) && (options & kTrackOptout))
      return ctx.reply->Error(kErrTrackingOptinOptout);
    if (((options & kTrackOptin) && (cur & kTrackOptout)) ||
        ((options & kTrackOptout) && (cur & kTrackOptin)))
      return ctx.reply->Error(kErrTrackingOptSwitch);
    if (options & kTrackBcast) {
      std::string a, b;
      Tracking::Overlap o = t.CheckPrefixes(ctx.client->id, prefixes, &a, &b);
      if (o != Tracking::Overlap::kNone)
        return ctx.reply->Error(
            TrackingPrefixOverlapError(a, b, o == Tracking::Overlap::kExisting));
    }
    t.Enable(ctx.client, static_cast<uint64_t>(redir), options, prefixes);
  } else if (EqualsIgnoreCase(ctx.args[2], "OFF")) {
    t.Disable(ctx.client);
  } else {
    return ctx.reply->Error(kErrSyntaxError);
  }
  ctx.reply->SimpleString("OK");
}

void ClientCaching(CommandContext& ctx) {
  const uint32_t f = ctx.client->tracking.load(kR);
  if (!(f & kTrackOn)) return ctx.reply->Error(kErrCachingNotTracking);
  std::string_view opt = ctx.args[2];
  if (EqualsIgnoreCase(opt, "YES")) {
    if (!(f & kTrackOptin)) return ctx.reply->Error(kErrCachingYes);
  } else if (EqualsIgnoreCase(opt, "NO")) {
    if (!(f & kTrackOptout)) return ctx.reply->Error(kErrCachingNo);
  } else {
    return ctx.reply->Error(kErrSyntaxError);
  }
  ctx.client->tracking.fetch_or(kTrackCaching, kR);
  ctx.reply->SimpleString("OK");
}

void ClientGetRedir(CommandContext& ctx) {
  if (ctx.client->tracking.load(kR) & kTrackOn)
    ctx.reply->Integer(static_cast<int64_t>(ctx.client->tracking_redir.load(kR)));
  else
    ctx.reply->Integer(-1);
}

void ClientTrackingInfo(CommandContext& ctx) {
  const uint32_t f = ctx.client->tracking.load(kR);
  std::vector<std::string_view> flags;
  flags.push_back(f & kTrackOn ? "on" : "off");
  if (f & kTrackBcast) flags.push_back("bcast");
  if (f & kTrackOptin) {
    flags.push_back("optin");
    if (f & kTrackCaching) flags.push_back("caching-yes");
  }
  if (f & kTrackOptout) {
    flags.push_back("optout");
    if (f & kTrackCaching) flags.push_back("caching-no");
  }
  if (f & kTrackNoloop) flags.push_back("noloop");
  if (f & kTrackBrokenRedir) flags.push_back("broken_redirect");
  ctx.reply->MapHeader(3);
  ctx.reply->Bulk("flags");
  ctx.reply->SetHeader(flags.size());
  for (std::string_view s : flags) ctx.reply->Bulk(s);
  ctx.reply->Bulk("redirect");
  ctx.reply->Integer(f & kTrackOn ? static_cast<int64_t>(ctx.client->tracking_redir.load(kR)) : -1);
  ctx.reply->Bulk("prefixes");
  std::vector<std::string> prefixes = ctx.env->tracking().Prefixes(ctx.client->id);
  ctx.reply->ArrayHeader(prefixes.size());
  for (const std::string& p : prefixes) ctx.reply->Bulk(p);
}

}  // namespace pion::server
