// Observability commands: SLOWLOG, LATENCY, MONITOR, ROLE, LASTSAVE
// (docs/protocol.md "Observability"; docs/operations.md).
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "net/client_info.h"
#include "persist/persistence.h"
#include "server/command_env.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

void HelpReply(CommandContext& ctx, std::span<const char* const> lines) {
  ctx.reply->ArrayHeader(lines.size());
  for (const char* l : lines) ctx.reply->SimpleString(l);
}

void Slowlog(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  size_t n = ctx.args.size();
  SlowLog& log = ctx.env->observability().slowlog();
  if (EqualsIgnoreCase(sub, "GET") && n <= 3) {
    size_t count = 10;
    if (n == 3) {
      auto c = ParseInt64Strict(ctx.args[2]);
      if (!c.has_value() || *c < -1) {
        ctx.reply->Error(kErrSlowlogCount);
        return;
      }
      count = *c == -1 ? SIZE_MAX : static_cast<size_t>(*c);
    }
    std::vector<SlowLogEntry> got = log.Get(count);
    ctx.reply->ArrayHeader(got.size());
    for (const SlowLogEntry& e : got) {
      ctx.reply->ArrayHeader(6);
      ctx.reply->Integer(static_cast<int64_t>(e.id));
      ctx.reply->Integer(e.unix_s);
      ctx.reply->Integer(static_cast<int64_t>(e.usec));
      ctx.reply->ArrayHeader(e.args.size());
      for (const std::string& a : e.args) ctx.reply->Bulk(a);
      ctx.reply->Bulk(e.addr);
      ctx.reply->Bulk(e.name);
    }
  } else if (EqualsIgnoreCase(sub, "LEN") && n == 2) {
    ctx.reply->Integer(static_cast<int64_t>(log.Len()));
  } else if (EqualsIgnoreCase(sub, "RESET") && n == 2) {
    log.Reset();
    ctx.reply->SimpleString("OK");
  } else if (EqualsIgnoreCase(sub, "HELP") && n == 2) {
    static const char* const kLines[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Print this help.",
    };
    HelpReply(ctx, kLines);
  } else {
    ctx.reply->Error(UnknownSubcommandError("SLOWLOG", sub));
  }
}

// LATENCY HISTOGRAM's slots: every slot with tracked calls (no names), or
// for each name in turn the command or subcommand ("client|id") and, for a
// command with subcommands, each of them; unknown names are skipped (Redis).
std::vector<size_t> HistogramSlots(const CommandTable& t, std::span<const std::string_view> names,
                                   const std::vector<TrackHist>& hists) {
  auto has_data = [&](size_t slot) {
    if (slot >= hists.size()) return false;
    for (uint64_t n : hists[slot])
      if (n != 0) return true;
    return false;
  };
  std::vector<size_t> out;
  if (names.empty()) {
    for (size_t i = 0; i < hists.size(); ++i)
      if (has_data(i)) out.push_back(i);
    return out;
  }
  for (std::string_view name : names) {
    const size_t bar = name.find('|');
    const CommandSpec* spec = t.Find(name.substr(0, bar));
    if (spec == nullptr) continue;
    const auto& subs = t.subcommands(spec);
    if (bar != std::string_view::npos) {
      for (const auto& [sub, slot] : subs)
        if (EqualsIgnoreCase(sub, name.substr(bar + 1)) && has_data(slot)) out.push_back(slot);
      continue;
    }
    if (has_data(t.StatIndex(spec))) out.push_back(t.StatIndex(spec));
    for (const auto& [sub, slot] : subs)
      if (has_data(slot)) out.push_back(slot);
  }
  return out;
}

// One command's cumulative distribution, as Redis: calls, then
// histogram_usec {2^i: calls that took at most 2^i us} for each i where the
// count grew.
void HistogramReply(ReplyBuilder* rb, const TrackHist& h) {
  uint64_t total = 0;
  for (uint64_t n : h) total += n;
  std::vector<std::pair<uint64_t, uint64_t>> points;
  uint64_t cumulative = 0, last = 0;
  size_t b = 0;
  for (size_t i = 0; i <= kTrackMaxLog2 && last < total; ++i) {
    const uint64_t bound = uint64_t{1} << i;
    while (b < kTrackBuckets && TrackBucketHighUs(b) <= bound) cumulative += h[b++];
    if (cumulative > last) points.emplace_back(bound, cumulative);
    last = cumulative;
  }
  rb->MapHeader(2);
  rb->Bulk("calls");
  rb->Integer(static_cast<int64_t>(total));
  rb->Bulk("histogram_usec");
  rb->MapHeader(points.size());
  for (const auto& [bound, n] : points) {
    rb->Integer(static_cast<int64_t>(bound));
    rb->Integer(static_cast<int64_t>(n));
  }
}

void Latency(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  size_t n = ctx.args.size();
  LatencyMonitor& lm = ctx.env->observability().latency();
  if (EqualsIgnoreCase(sub, "LATEST") && n == 2) {
    std::vector<LatencyEventInfo> all = lm.Latest();
    ctx.reply->ArrayHeader(all.size());
    for (const LatencyEventInfo& e : all) {
      ctx.reply->ArrayHeader(4);
      ctx.reply->Bulk(e.event);
      ctx.reply->Integer(e.latest.unix_s);
      ctx.reply->Integer(static_cast<int64_t>(e.latest.ms));
      ctx.reply->Integer(static_cast<int64_t>(e.max_ms));
    }
  } else if (EqualsIgnoreCase(sub, "HISTORY") && n == 3) {
    std::vector<LatencySample> h = lm.History(std::string(ctx.args[2]));
    ctx.reply->ArrayHeader(h.size());
    for (const LatencySample& s : h) {
      ctx.reply->ArrayHeader(2);
      ctx.reply->Integer(s.unix_s);
      ctx.reply->Integer(static_cast<int64_t>(s.ms));
    }
  } else if (EqualsIgnoreCase(sub, "RESET")) {
    std::vector<std::string> events;
    for (size_t i = 2; i < n; ++i) events.emplace_back(ctx.args[i]);
    ctx.reply->Integer(static_cast<int64_t>(lm.Reset(events)));
  } else if (EqualsIgnoreCase(sub, "DOCTOR") && n == 2) {
    std::vector<LatencyEventInfo> all = lm.Latest();
    std::string text;
    if (ctx.env->control().ConfigSnapshot().latency_monitor_threshold == 0) {
      text = "The latency monitor is off: CONFIG SET latency-monitor-threshold <milliseconds>.\n";
    } else if (all.empty()) {
      text = "No latency spikes were observed.\n";
    } else {
      for (const LatencyEventInfo& e : all)
        text += e.event + ": latest " + std::to_string(e.latest.ms) + " ms, max " +
                std::to_string(e.max_ms) + " ms. See SLOWLOG GET for the commands.\n";
    }
    ctx.reply->Verbatim(text);
  } else if (EqualsIgnoreCase(sub, "HISTOGRAM")) {
    const CommandTable& t = ctx.env->commands();
    const std::vector<TrackHist> hists = ctx.env->control().TrackedLatencyAll();
    const std::vector<size_t> slots = HistogramSlots(t, ctx.args.subspan(2), hists);
    ctx.reply->MapHeader(slots.size());
    for (size_t slot : slots) {
      ctx.reply->Bulk(t.stat_name(slot));
      HistogramReply(ctx.reply, hists[slot]);
    }
  } else if (EqualsIgnoreCase(sub, "HELP") && n == 2) {
    static const char* const kLines[] = {
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        ("    Return a cumulative distribution of latencies in the format of a histogram for the "
         "specified command names."),
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Print this help.",
    };
    HelpReply(ctx, kLines);
  } else if (EqualsIgnoreCase(sub, "LATEST") || EqualsIgnoreCase(sub, "HISTORY") ||
             EqualsIgnoreCase(sub, "DOCTOR") || EqualsIgnoreCase(sub, "HELP")) {
    // A known subcommand with the wrong number of arguments (Redis's text).
    ctx.reply->Error(WrongArity("latency|" + ToLower(sub)));
  } else {
    ctx.reply->Error(UnknownSubcommandError("LATENCY", sub));
  }
}

void Monitor(CommandContext& ctx) {
  ctx.reply->SimpleString("OK");
  ctx.env->observability().AddMonitor(ctx.client);
}

void Role(CommandContext& ctx) {
  ctx.reply->ArrayHeader(3);
  ctx.reply->Bulk("master");
  ctx.reply->Integer(0);  // replication offset: pion has no replicas
  ctx.reply->ArrayHeader(0);
}

void LastSave(CommandContext& ctx) {
  int64_t t = 0;
  if (persist::Persistence* p = ctx.env->persistence()) t = p->Stats().last_save_unix;
  if (t == 0) {
    // No snapshot yet: the start time, as Redis reports its start when it loaded nothing.
    uint64_t up_us = MonotonicUs() - ctx.env->control().start_time_us();
    t = static_cast<int64_t>((UnixMicros() - up_us) / 1000000);
  }
  ctx.reply->Integer(t);
}

}  // namespace

// SLOWLOG's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kSlowlogSubcommands[] = {
    {"GET", "2.2.12", "[count]", "Returns the slow log's entries."},
    {"LEN", "2.2.12", "", "Returns the number of entries in the slow log."},
    {"RESET", "2.2.12", "", "Clears all entries from the slow log."},
    {"HELP", "6.2.0", "", "Shows helpful text about the subcommands."},
};

// LATENCY's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kLatencySubcommands[] = {
    {"LATEST", "2.8.13", "", "Returns the latest latency samples for all events."},
    {"HISTORY", "2.8.13", "event", "Returns timestamp-latency samples for an event."},
    {"RESET", "2.8.13", "[event...]", "Resets the latency data for one or more events."},
    {"DOCTOR", "2.8.13", "", "Returns a human-readable latency analysis report."},
    {"HISTOGRAM", "7.0.0", "[command [command ...]]",
     "Returns the cumulative distribution of latencies of a subset or all commands."},
    {"HELP", "2.8.13", "", "Returns helpful text about the subcommands."},
};

void AddObserveCommands(std::vector<CommandSpec>* out) {
  out->push_back({"SLOWLOG", -2, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, Slowlog,
                  "The slow log: GET [count], LEN, RESET.", "server", "2.2.12", "",
                  kSlowlogSubcommands});
  out->push_back({"LATENCY", -2, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, Latency,
                  "The latency monitor: LATEST, HISTORY event, RESET [event ...], DOCTOR, "
                  "HISTOGRAM [command ...].",
                  "server", "2.8.13", "", kLatencySubcommands});
  out->push_back({"MONITOR", 1, kCmdAdmin | kCmdLoading | kCmdStale, 0, 0, 0, Monitor,
                  "Streams every command the server runs, from every client.", "server", "1.0.0",
                  ""});
  out->push_back({"ROLE", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, Role,
                  "Replication role: always master.", "server", "2.8.12", ""});
  out->push_back({"LASTSAVE", 1, kCmdFast | kCmdLoading | kCmdStale, 0, 0, 0, LastSave,
                  "Unix time of the last successful snapshot (or of the start).", "server", "1.0.0",
                  ""});
  // As Redis 7: ROLE and LASTSAVE are @admin @dangerous (server state, not a tenant's).
  for (size_t i = out->size() - 2; i < out->size(); ++i)
    (*out)[i].acl_categories |= kAclAdmin | kAclDangerous;
}

}  // namespace pion::server
