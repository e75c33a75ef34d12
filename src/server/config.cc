#include "server/config.h"

#include <cstdio>
#include <cstring>
#include <set>

#include "base/check.h"
#include "base/strutil.h"
#include "net/resp_parser.h"
#include "server/notify.h"
#include "store/strings.h"

namespace pion::server {

namespace {

constexpr uint64_t kHundredYears = 100ull * 365 * 86400;
// A nonzero output limit below this would cut every client that pipelines.
constexpr uint64_t kMinOutputLimit = 1ull << 20;

using Values = std::vector<std::string>;

Status Bad(const std::string& name, const std::string& value, std::string_view expected) {
  std::string m = "invalid value '" + value + "' for '" + name + "': expected ";
  m.append(expected);
  return Status::InvalidArgument(m);
}

Result<uint64_t> UintArg(const std::string& name, const std::string& v, uint64_t min,
                         uint64_t max) {
  auto n = ParseUint64Strict(v);
  if (!n.has_value() || *n < min || *n > max) {
    return Bad(name, v, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return *n;
}

Result<uint64_t> BytesArg(const std::string& name, const std::string& v, uint64_t min) {
  auto n = ParseBytes(v);
  if (!n.has_value() || *n < min)
    return Bad(name, v,
               "a byte size like 100mb (suffixes kb, mb, gb)" +
                   (min > 0 ? ", at least " + std::to_string(min) : std::string()));
  return *n;
}

Result<bool> BoolArg(const std::string& name, const std::string& v) {
  if (EqualsIgnoreCase(v, "yes") || EqualsIgnoreCase(v, "true") || v == "1") return true;
  if (EqualsIgnoreCase(v, "no") || EqualsIgnoreCase(v, "false") || v == "0") return false;
  return Bad(name, v, "yes or no");
}

// Splits a config file line into tokens: whitespace separated, with "double"
// or 'single' quotes for values holding spaces (redis.conf rules).
bool SplitLine(const std::string& line, Values* out) {
  std::string arena;
  std::vector<std::string_view> views;
  if (!net::SplitInlineArgs(line, &arena, &views)) return false;
  for (auto v : views) out->emplace_back(v);
  return true;
}

// ---------------------------------------------------------------- codecs
// A codec for one field: `parse` turns the single value into T (or an error
// naming the option), `print` turns T back into the text CONFIG GET shows.

template <typename T, typename Parse, typename Print>
ConfigCodec Scalar(T Config::*field, Parse parse, Print print) {
  ConfigCodec c;
  c.set = [field, parse](Config* cfg, const std::string& name, const Values& values) -> Status {
    if (values.size() != 1) {
      return Status::InvalidArgument("option '" + name + "' takes exactly one value (" +
                                     std::to_string(values.size()) + " given)");
    }
    Result<T> r = parse(name, values[0]);
    if (!r.ok()) return r.status();
    cfg->*field = *r;
    return Status::OK();
  };
  c.get = [field, print](const Config& cfg) { return print(cfg.*field); };
  c.copy = [field](const Config& from, Config* to) { to->*field = from.*field; };
  return c;
}

std::string PrintU64(uint64_t v) { return std::to_string(v); }
std::string PrintYesNo(bool v) { return v ? "yes" : "no"; }

// An integer from min to max.
ConfigCodec Uint(uint64_t Config::*field, uint64_t min, uint64_t max) {
  return Scalar(
      field, [=](const std::string& n, const std::string& v) { return UintArg(n, v, min, max); },
      PrintU64);
}
ConfigCodec Int(int Config::*field, int min, int max) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<int> {
        auto r = UintArg(n, v, static_cast<uint64_t>(min), static_cast<uint64_t>(max));
        if (!r.ok()) return r.status();
        return static_cast<int>(*r);
      },
      [](int v) { return std::to_string(v); });
}

// A signed integer from min to max.
ConfigCodec Int64(int64_t Config::*field, int64_t min, int64_t max) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<int64_t> {
        auto r = ParseInt64Strict(v);
        if (!r.has_value() || *r < min || *r > max)
          return Bad(n, v, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
        return *r;
      },
      [](int64_t v) { return std::to_string(v); });
}

// A byte size (100mb) of at least min.
ConfigCodec Bytes(uint64_t Config::*field, uint64_t min) {
  return Scalar(
      field, [=](const std::string& n, const std::string& v) { return BytesArg(n, v, min); },
      PrintU64);
}

// 0 (no limit) or a byte size of at least min; `expected` words the rule.
[[maybe_unused]] ConfigCodec BytesOrZero(uint64_t Config::*field, uint64_t min,
                                         const char* expected) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<uint64_t> {
        auto r = BytesArg(n, v, 0);
        if (!r.ok()) return r.status();
        if (*r != 0 && *r < min) return Bad(n, v, expected);
        return *r;
      },
      PrintU64);
}

// maxmemory-clients, as Redis 7: 0 (no limit), a byte size, or a percentage
// of maxmemory ("10%", up to 100%).
ConfigCodec ClientsMemory() {
  ConfigCodec c;
  c.set = [](Config* cfg, const std::string& name, const Values& values) -> Status {
    if (values.size() != 1) {
      return Status::InvalidArgument("option '" + name + "' takes exactly one value (" +
                                     std::to_string(values.size()) + " given)");
    }
    const std::string& v = values[0];
    if (!v.empty() && v.back() == '%') {
      auto p = ParseUint64Strict(std::string_view(v).substr(0, v.size() - 1));
      if (!p.has_value())
        return Bad(name, v, "0 (no limit), a byte size, or a percentage of maxmemory up to 100%");
      // Redis 7.0's own words for a percentage past the maximum.
      if (*p > 100)
        return Status::InvalidArgument("percentage argument must be less or equal to 100");
      cfg->maxmemory_clients = 0;
      cfg->maxmemory_clients_percent = *p;
      return Status::OK();
    }
    auto r = BytesArg(name, v, 0);
    if (!r.ok()) return r.status();
    cfg->maxmemory_clients = *r;
    cfg->maxmemory_clients_percent = 0;
    return Status::OK();
  };
  c.get = [](const Config& cfg) {
    return cfg.maxmemory_clients_percent > 0 ? std::to_string(cfg.maxmemory_clients_percent) + "%"
                                             : std::to_string(cfg.maxmemory_clients);
  };
  c.copy = [](const Config& from, Config* to) {
    to->maxmemory_clients = from.maxmemory_clients;
    to->maxmemory_clients_percent = from.maxmemory_clients_percent;
  };
  return c;
}

ConfigCodec Bool(bool Config::*field) { return Scalar(field, BoolArg, PrintYesNo); }

// A boolean that may be given without a value (--kvcache means yes).
ConfigCodec Flag(bool Config::*field) {
  ConfigCodec c = Bool(field);
  ConfigCodec::SetFn parse_value = std::move(c.set);
  c.set = [field, parse_value](Config* cfg, const std::string& name, const Values& values) {
    if (values.empty()) {
      cfg->*field = true;
      return Status::OK();
    }
    return parse_value(cfg, name, values);
  };
  c.is_flag = true;
  return c;
}

// Any text; `nonempty` (when set) is what an empty value should have been.
ConfigCodec String(std::string Config::*field, const char* nonempty = nullptr) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<std::string> {
        if (nonempty != nullptr && v.empty()) return Bad(n, v, nonempty);
        return v;
      },
      [](const std::string& v) { return v; });
}

std::string_view FsyncName(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::kAlways:
      return "always";
    case FsyncPolicy::kEverySec:
      return "everysec";
    case FsyncPolicy::kNo:
      return "no";
  }
  return "everysec";
}

ConfigCodec Fsync(FsyncPolicy Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<FsyncPolicy> {
        for (FsyncPolicy p : {FsyncPolicy::kAlways, FsyncPolicy::kEverySec, FsyncPolicy::kNo})
          if (EqualsIgnoreCase(v, FsyncName(p))) return p;
        return Bad(n, v, "always, everysec or no");
      },
      [](FsyncPolicy p) { return std::string(FsyncName(p)); });
}

ConfigCodec Level(LogLevel Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<LogLevel> {
        LogLevel l;
        if (!ParseLogLevel(ToLower(v), &l)) return Bad(n, v, "debug, verbose, notice or warning");
        return l;
      },
      [](LogLevel l) { return std::string(LogLevelName(l)); });
}

Result<uint64_t> OutputLimitArg(const std::string& name, const std::string& v) {
  auto n = ParseBytes(v);
  if (!n.has_value() || (*n != 0 && *n < kMinOutputLimit))
    return Bad(name, v, "0 (no limit) or a byte size of at least 1mb");
  return *n;
}

// client-output-buffer-limit: "<hard>" (pion's short form, the normal class)
// or Redis's "<class> <hard> <soft> <seconds>" for the classes normal,
// replica (slave) and pubsub, several in one value, as separate values or as
// one space-separated value (CONFIG SET). A class not named keeps its limits.
struct OutputClassFields {
  uint64_t Config::*hard;
  uint64_t Config::*soft;
  uint64_t Config::*secs;
};
constexpr OutputClassFields kOutputNormal{&Config::client_output_buffer_limit,
                                          &Config::client_output_buffer_soft_limit,
                                          &Config::client_output_buffer_soft_seconds};
constexpr OutputClassFields kOutputReplica{&Config::replica_output_buffer_limit,
                                           &Config::replica_output_buffer_soft_limit,
                                           &Config::replica_output_buffer_soft_seconds};
constexpr OutputClassFields kOutputPubsub{&Config::pubsub_output_buffer_limit,
                                          &Config::pubsub_output_buffer_soft_limit,
                                          &Config::pubsub_output_buffer_soft_seconds};

const OutputClassFields* OutputClass(std::string_view name) {
  if (EqualsIgnoreCase(name, "normal")) return &kOutputNormal;
  if (EqualsIgnoreCase(name, "replica") || EqualsIgnoreCase(name, "slave")) return &kOutputReplica;
  if (EqualsIgnoreCase(name, "pubsub")) return &kOutputPubsub;
  return nullptr;
}

Status SetOutputLimit(Config* cfg, const std::string& name, Values values) {
  if (values.size() == 1 && values[0].find(' ') != std::string::npos) {
    Values parts;
    if (!SplitLine(values[0], &parts))
      return Bad(name, values[0], "<class> <hard> <soft> <seconds>");
    values = std::move(parts);
  }
  if (values.size() == 1) {
    auto hard = OutputLimitArg(name, values[0]);
    if (!hard.ok()) return hard.status();
    cfg->client_output_buffer_limit = *hard;
    return Status::OK();
  }
  // Redis 7.0's words for the class form's mistakes.
  if (values.empty() || values.size() % 4 != 0)
    return Status::InvalidArgument("Wrong number of arguments in buffer limit configuration.");
  Config next = *cfg;  // all classes or none
  for (size_t i = 0; i < values.size(); i += 4) {
    const OutputClassFields* f = OutputClass(values[i]);
    if (f == nullptr)
      return Status::InvalidArgument(
          "Invalid client class specified in buffer limit configuration.");
    auto hard = ParseBytes(values[i + 1]);
    auto soft = ParseBytes(values[i + 2]);
    auto secs = UintArg(name, values[i + 3], 0, kHundredYears);
    if (!hard.has_value() || !soft.has_value() || !secs.ok())
      return Status::InvalidArgument(
          "Error in hard, soft or soft_seconds setting in buffer limit configuration.");
    next.*(f->hard) = *hard;
    next.*(f->soft) = *soft;
    next.*(f->secs) = *secs;
  }
  for (const OutputClassFields* f : {&kOutputNormal, &kOutputReplica, &kOutputPubsub}) {
    cfg->*(f->hard) = next.*(f->hard);
    cfg->*(f->soft) = next.*(f->soft);
    cfg->*(f->secs) = next.*(f->secs);
  }
  return Status::OK();
}

// latency-tracking-info-percentiles: a list of percentiles from 0 to 100, given
// as several values or as one space-separated value (CONFIG SET's form); ""
// is the empty list. CONFIG GET prints each as %f does, trailing zeros removed.
ConfigCodec Percentiles(std::vector<double> Config::*field) {
  ConfigCodec c;
  c.set = [field](Config* cfg, const std::string& name, const Values& values) -> Status {
    std::vector<double> out;
    for (const std::string& v : values) {
      Values words;
      if (!SplitLine(v, &words)) return Bad(name, v, "percentiles from 0 to 100");
      for (const std::string& w : words) {
        std::optional<double> d = ParseDouble(w);
        // Redis 7.0's own words for either mistake.
        if (!d.has_value())
          return Status::InvalidArgument("Invalid latency-tracking-info-percentiles parameters");
        if (*d < 0.0 || *d > 100.0)
          return Status::InvalidArgument(
              "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]");
        out.push_back(*d);
      }
    }
    cfg->*field = std::move(out);
    return Status::OK();
  };
  c.get = [field](const Config& cfg) {
    std::string s;
    for (double d : cfg.*field) {
      if (!s.empty()) s += ' ';
      s += FormatPercentile(d);
    }
    return s;
  };
  c.copy = [field](const Config& from, Config* to) { to->*field = from.*field; };
  return c;
}

ConfigCodec OutputLimit() {
  ConfigCodec c;
  c.set = SetOutputLimit;
  c.get = [](const Config& cfg) {
    // Redis's order and names (CONFIG GET shows "slave" for the replica class).
    std::string s;
    const std::pair<const char*, const OutputClassFields*> kClasses[] = {
        {"normal", &kOutputNormal}, {"slave", &kOutputReplica}, {"pubsub", &kOutputPubsub}};
    for (const auto& [cls, f] : kClasses) {
      if (!s.empty()) s += ' ';
      s += cls;
      s += ' ' + PrintU64(cfg.*(f->hard)) + ' ' + PrintU64(cfg.*(f->soft)) + ' ' +
           PrintU64(cfg.*(f->secs));
    }
    return s;
  };
  c.copy = [](const Config& from, Config* to) {
    for (const OutputClassFields* f : {&kOutputNormal, &kOutputReplica, &kOutputPubsub}) {
      to->*(f->hard) = from.*(f->hard);
      to->*(f->soft) = from.*(f->soft);
      to->*(f->secs) = from.*(f->secs);
    }
  };
  c.list_keyword = "normal|replica|slave|pubsub";
  return c;
}

// notify-keyspace-events: Redis's class letters (server/notify.h).
ConfigCodec NotifyEvents(uint32_t Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<uint32_t> {
        uint32_t f = 0;
        if (!ParseNotifyFlags(v, &f))
          return Bad(n, v, "event class characters from 'Ag$lshzxeKEtmdn'");
        return f;
      },
      [](uint32_t f) { return NotifyFlagsString(f); });
}

// acl-pubsub-default: allchannels or resetchannels.
ConfigCodec PubsubDefault(bool Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<bool> {
        if (EqualsIgnoreCase(v, "allchannels")) return true;
        if (EqualsIgnoreCase(v, "resetchannels")) return false;
        return Bad(n, v, "allchannels or resetchannels");
      },
      [](bool all) { return std::string(all ? "allchannels" : "resetchannels"); });
}

// fastlane-port: -1 (port + 1), 0 (off) or a port.
ConfigCodec FastLanePort(int Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<int> {
        if (v == "-1") return -1;
        auto r = ParseUint64Strict(v);
        if (!r.has_value() || *r > 65535)
          return Bad(n, v, "-1 (port + 1), 0 (off) or a port up to 65535");
        return static_cast<int>(*r);
      },
      [](int v) { return std::to_string(v); });
}

// A byte size from min to max.
ConfigCodec BytesRange(uint64_t Config::*field, uint64_t min, uint64_t max, const char* expected) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<uint64_t> {
        auto r = BytesArg(n, v, min);
        if (!r.ok()) return r.status();
        if (*r > max) return Bad(n, v, expected);
        return *r;
      },
      PrintU64);
}

// One of a fixed set of lower-case words (case-insensitive input).
ConfigCodec Word(std::string Config::*field, std::vector<std::string> words, const char* expected) {
  return Scalar(
      field,
      [=](const std::string& n, const std::string& v) -> Result<std::string> {
        std::string w = ToLower(v);
        for (const std::string& ok : words)
          if (w == ok) return w;
        return Bad(n, v, expected);
      },
      [](const std::string& v) { return v; });
}

// maxmemory-policy: one of store::EvictPolicy's names, stored as that name.
ConfigCodec Policy(std::string Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<std::string> {
        store::EvictPolicy p;
        if (!store::ParseEvictPolicy(v, &p))
          return Bad(n, v,
                     "allkeys-lru, noeviction, volatile-lru, allkeys-random, allkeys-lfu, "
                     "volatile-lfu, volatile-random or volatile-ttl");
        return std::string(store::EvictPolicyName(p));
      },
      [](const std::string& v) { return v; });
}

// tls-protocols: space-separated TLSv1.2 / TLSv1.3 (empty = both).
ConfigCodec TlsProtocols(std::string Config::*field) {
  return Scalar(
      field,
      [](const std::string& n, const std::string& v) -> Result<std::string> {
        Values words;
        if (!SplitLine(v, &words)) return Bad(n, v, "TLSv1.2 and/or TLSv1.3");
        for (const std::string& w : words)
          if (w != "TLSv1.2" && w != "TLSv1.3") return Bad(n, v, "TLSv1.2 and/or TLSv1.3");
        return v;
      },
      [](const std::string& v) { return v; });
}

// save: "seconds changes [seconds changes ...]" (Redis's `save`; "" = none),
// one value or several (a config file line, --save 3600 1 300 100). Redis's
// words for any mistake.
ConfigCodec SavePoints() {
  ConfigCodec c;
  c.set = [](Config* cfg, const std::string& /*name*/, const Values& values) -> Status {
    Values words;
    for (const std::string& v : values)
      if (!SplitLine(v, &words)) return Status::InvalidArgument("Invalid save parameters");
    if (words.size() % 2 != 0) return Status::InvalidArgument("Invalid save parameters");
    std::vector<std::pair<uint64_t, uint64_t>> points;
    for (size_t i = 0; i < words.size(); i += 2) {
      auto secs = ParseUint64Strict(words[i]);
      auto changes = ParseUint64Strict(words[i + 1]);
      if (!secs.has_value() || *secs < 1 || *secs > kHundredYears || !changes.has_value() ||
          *changes > (1ull << 62))
        return Status::InvalidArgument("Invalid save parameters");
      points.emplace_back(*secs, *changes);
    }
    cfg->save_points = std::move(points);
    return Status::OK();
  };
  c.get = [](const Config& cfg) {
    std::string s;
    for (const auto& [secs, changes] : cfg.save_points) {
      if (!s.empty()) s += ' ';
      s += PrintU64(secs) + ' ' + PrintU64(changes);
    }
    return s;
  };
  c.copy = [](const Config& from, Config* to) { to->save_points = from.save_points; };
  return c;
}

constexpr bool kRuntime = true;
constexpr bool kStartup = false;

// The option table: one row per setting, in pion.conf order. Adding an option
// is a field in Config, a row here and its documented line in pion.conf.
const std::vector<ConfigOption>& Table() {
  static const std::vector<ConfigOption> kOptions = {
      {"port", Int(&Config::port, 0, 65535), "1974", kRuntime, "N", "TCP port"},
      {"bind", String(&Config::bind, "an IP address"), "127.0.0.1", kStartup, "ADDR",
       "listening address"},
      {"dir", String(&Config::dir, "a directory"), ".", kStartup, "PATH",
       "data directory, created if missing"},
      {"kvcache", Flag(&Config::kvcache), "no", kStartup, "",
       "enable the KV.PREFIX / V.* commands"},
      {"workers", Int(&Config::workers, 0, 64), "0", kStartup, "N", "event-loop threads",
       "0 = cores, at most 64", 'w'},
      {"max-sessions", Uint(&Config::max_sessions, 2, 1ull << 32), "256", kStartup, "N",
       "session cap; a namespace uses two"},
      {"max-chain-length", Uint(&Config::max_chain_length, 1, 65536), "1024", kStartup, "N",
       "namespaces in one KV.PREFIX.REGISTER ... PARENT chain"},
      {"maxmemory", Bytes(&Config::maxmemory, 0), "0", kRuntime, "BYTES",
       "budget for stored K/V and string keys, e.g. 4gb", "0 = none"},
      {"maxmemory-policy", Policy(&Config::maxmemory_policy), "allkeys-lru", kRuntime,
       "allkeys-lru|noeviction|volatile-lru|allkeys-random|allkeys-lfu|volatile-lfu|"
       "volatile-random|volatile-ttl",
       "what a full budget evicts"},
      {"maxmemory-samples", Uint(&Config::maxmemory_samples, 1, 64), "5", kRuntime, "N",
       "namespaces sampled per LRU eviction (Redis's eviction pool); string keys per LFU, TTL "
       "or volatile-random eviction"},
      {"lfu-log-factor", Uint(&Config::lfu_log_factor, 0, 1000000), "10", kRuntime, "N",
       "how slowly a key's LFU access counter grows (Redis's)"},
      {"lfu-decay-time", Uint(&Config::lfu_decay_time, 0, 1000000), "1", kRuntime, "MINUTES",
       "minutes per one-step decay of an idle key's LFU counter", "0 = never decays"},
      {"max-block-leases", Uint(&Config::max_block_leases, 0, 1ull << 32), "1000000", kRuntime, "N",
       "live KV.BLOCK.MATCH ... PIN leases", "0 = PIN always refused"},
      {"appendfsync", Fsync(&Config::appendfsync), "everysec", kRuntime, "always|everysec|no",
       "WAL fsync policy"},
      {"requirepass", String(&Config::requirepass), "", kRuntime, "PASS", "require AUTH"},
      {"loglevel", Level(&Config::loglevel), "notice", kRuntime, "debug|verbose|notice|warning",
       "log verbosity"},
      {"logfile", String(&Config::logfile), "", kStartup, "PATH", "log file", "stderr"},
      {"daemonize", Bool(&Config::daemonize), "no", kStartup, "yes|no",
       "run in the background (stdin, stdout, stderr to /dev/null: set logfile)"},
      {"timeout", Uint(&Config::timeout, 0, kHundredYears), "0", kRuntime, "SECONDS",
       "close idle clients", "0 = never"},
      {"maxclients", Uint(&Config::maxclients, 1, 1000000), "10000", kRuntime, "N",
       "connection cap"},
      {"proto-max-bulk-len", Bytes(&Config::proto_max_bulk_len, 1), "1gb", kStartup, "BYTES",
       "largest bulk string"},
      {"client-query-buffer-limit", Bytes(&Config::client_query_buffer_limit, 1024), "2gb",
       kRuntime, "BYTES", "largest pending command"},
      {"client-output-buffer-limit", OutputLimit(),
       "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60", kRuntime,
       "'CLASS HARD SOFT SECONDS ...' (or HARD)",
       "unsent replies before disconnect, per class (normal, replica, pubsub)"},
      {"notify-keyspace-events", NotifyEvents(&Config::notify_keyspace_events), "", kRuntime,
       "CLASSES", "keyspace notifications, Redis's class letters (KEA, Kx, ...)", "none"},
      {"acl-pubsub-default", PubsubDefault(&Config::acl_pubsub_allchannels), "resetchannels",
       kRuntime, "allchannels|resetchannels", "Pub/Sub channels of a new ACL user"},
      {"maxmemory-clients", ClientsMemory(), "2gb", kRuntime, "BYTES|N%",
       "all clients' buffers together (N% of maxmemory)", "2gb, 0 = none"},
      {"buffer-recycle-bytes", Bytes(&Config::buffer_recycle_bytes, 0), "256mb", kRuntime, "BYTES",
       "freed value/argument blocks kept for reuse", "256mb, 0 = none"},
      {"protected-mode", Bool(&Config::protected_mode), "yes", kStartup, "yes|no",
       "refuse remote clients without requirepass"},
      {"cluster-emulated", Bool(&Config::cluster_emulated), "no", kStartup, "yes|no",
       "answer CLUSTER SLOTS/SHARDS/NODES/INFO as a one-node cluster owning every slot"},
      // ACL (docs/security.md). `user NAME RULES...` lines are not a setting:
      // ApplySetting collects them (also --user 'NAME RULES...').
      {"aclfile", String(&Config::aclfile), "", kStartup, "PATH",
       "ACL users file for ACL LOAD / SAVE (not with user lines)", "none"},
      {"acllog-max-len", Uint(&Config::acllog_max_len, 0, 1ull << 20), "128", kRuntime, "N",
       "ACL LOG entries kept"},
      // TLS (docs/security.md); CONFIG SET of a tls-* setting reloads the context.
      {"tls-port", Int(&Config::tls_port, 0, 65535), "0", kStartup, "N",
       "TLS listener; with --port 0, TLS only", "0 = none"},
      {"tls-cert-file", String(&Config::tls_cert_file), "", kRuntime, "PATH",
       "server certificate chain (PEM)", "none"},
      {"tls-key-file", String(&Config::tls_key_file), "", kRuntime, "PATH", "its private key (PEM)",
       "none"},
      {"tls-ca-cert-file", String(&Config::tls_ca_cert_file), "", kRuntime, "PATH",
       "CA bundle that signs client certificates", "none"},
      {"tls-auth-clients",
       Word(&Config::tls_auth_clients, {"yes", "no", "optional"}, "yes, no or optional"), "yes",
       kRuntime, "yes|no|optional", "client certificate required / not asked / checked if sent"},
      {"tls-protocols", TlsProtocols(&Config::tls_protocols), "", kRuntime, "'TLSv1.2 TLSv1.3'",
       "TLS protocols allowed", "both"},
      {"tls-ciphers", String(&Config::tls_ciphers), "", kRuntime, "LIST",
       "TLS 1.2 cipher list (OpenSSL syntax)", "OpenSSL's"},
      {"tls-ciphersuites", String(&Config::tls_ciphersuites), "", kRuntime, "LIST",
       "TLS 1.3 cipher suites (OpenSSL syntax)", "OpenSSL's"},
      {"tls-fastlane", Bool(&Config::tls_fastlane), "no", kStartup, "yes|no",
       "the binary fast lane speaks TLS (same certificates)"},
      {"auto-save-wal-bytes", Bytes(&Config::auto_save_wal_bytes, 0), "0", kStartup, "BYTES",
       "WAL size that triggers a snapshot", "0 = auto"},
      {"auto-save-retry-min", Uint(&Config::auto_save_retry_min, 1, 86400), "1", kStartup,
       "SECONDS", "first retry of a failed automatic snapshot"},
      {"auto-save-retry-max", Uint(&Config::auto_save_retry_max, 1, 86400), "300", kStartup,
       "SECONDS", "longest retry interval, doubling from min"},
      {"wal-repair", Flag(&Config::wal_repair), "no", kStartup, "",
       "start even if the WAL is corrupt mid-file"},
      {"wal-preallocate-bytes", Bytes(&Config::wal_preallocate_bytes, 0), "64mb", kStartup, "BYTES",
       "disk space reserved ahead of the WAL's end", "0 = off"},
      {"wal-recycle", Bool(&Config::wal_recycle), "yes", kStartup, "yes|no",
       "keep the WAL a compaction retires (one WAL's size of disk) as the next one's file"},
      {"snapshot-mmap", Bool(&Config::snapshot_mmap), "yes", kStartup, "yes|no",
       "load the snapshot by mapping it (rows stay in the page cache)"},
      {"snapshot-verify-threads", Uint(&Config::snapshot_verify_threads, 0, 64), "0", kStartup, "N",
       "threads verifying a mapped snapshot's checksums at start-up",
       "0 = one per core, at most 8"},
      {"appendonly", Bool(&Config::appendonly), "yes", kStartup, "yes|no",
       "WAL and snapshots for --kvcache"},
      {"save", SavePoints(), "", kRuntime, "'SECONDS CHANGES ...'",
       "snapshot in the background after CHANGES writes within SECONDS (Redis's save points)",
       "none"},
      {"key-load-delay", Int64(&Config::key_load_delay, INT32_MIN, INT32_MAX), "0", kRuntime, "US",
       "Redis's hidden test setting, accepted and shown; pion's loading ignores it", nullptr, 0,
       true},
      // The binary fast lane (docs/protocol.md "Binary fast lane"). At most 2 GiB
      // bodies: every reply to a frame then fits a response frame's u32 length.
      {"fastlane-port", FastLanePort(&Config::fastlane_port), "-1", kStartup, "N",
       "binary fast lane port, with --kvcache", "-1 = port + 1, 0 = off"},
      {"fastlane-max-frame-len",
       BytesRange(&Config::fastlane_max_frame_len, 1024, 2ull << 30, "a byte size from 1kb to 2gb"),
       "1gb", kStartup, "BYTES", "largest fast-lane frame body", "1gb, at most 2gb"},
      // Server-side attention (docs/attention.md §5a).
      {"attend-max-slots", Uint(&Config::attend_max_slots, 1, 1ull << 24), "4096", kRuntime, "N",
       "warm attention slots ((sid, layer) pairs)"},
      {"attend-maxmemory", Bytes(&Config::attend_maxmemory, 0), "0", kRuntime, "BYTES",
       "bytes of warm attention slots", "0 = none"},
      {"attend-cold-slots", Uint(&Config::attend_cold_slots, 0, 1ull << 24), "65536", kRuntime, "N",
       "entries of the cold-slot registry"},
      {"attend-precision",
       Word(&Config::attend_precision, {"f32", "f16", "int8"}, "f32, f16 or int8"), "f16", kRuntime,
       "f32|f16|int8", "precision of new attention slots"},
      {"attend-threads", Int(&Config::attend_threads, 0, 256), "0", kStartup, "N",
       "attention compute pool threads", "0 = cores"},
      {"attend-pool-min-bytes", Bytes(&Config::attend_pool_min_bytes, 0), "1mb", kRuntime, "BYTES",
       "queries reading less K/V run inline on the worker"},
      {"slowlog-log-slower-than", Int64(&Config::slowlog_log_slower_than, -1, 3600000000), "10000",
       kRuntime, "US", "SLOWLOG threshold in microseconds", "10000; 0 logs every command, -1 none"},
      {"slowlog-max-len", Uint(&Config::slowlog_max_len, 0, 1000000), "128", kRuntime, "N",
       "SLOWLOG entries kept"},
      {"tracking-table-max-keys", Uint(&Config::tracking_table_max_keys, 0, 1000000000000),
       "1000000", kRuntime, "N", "keys the CLIENT TRACKING table remembers", "0 = no bound"},
      {"latency-monitor-threshold", Uint(&Config::latency_monitor_threshold, 0, 86400000), "0",
       kRuntime, "MS", "LATENCY monitor threshold", "0 = off"},
      {"latency-tracking", Bool(&Config::latency_tracking), "yes", kRuntime, "yes|no",
       "per-command latency histograms (INFO latencystats)"},
      {"latency-tracking-info-percentiles", Percentiles(&Config::latency_tracking_percentiles),
       "50 99 99.9", kRuntime, "'P ...'", "percentiles INFO latencystats shows",
       "50 99 99.9; \"\" = none"},
      {"metrics-port", Int(&Config::metrics_port, 0, 65535), "0", kStartup, "N",
       "Prometheus GET /metrics on --bind:N", "0 = off"},
      // KV events for routers (docs/kv_events.md).
      {"kv-events-endpoint", String(&Config::kv_events_endpoint), "", kStartup, "ENDPOINT",
       "ZeroMQ endpoint KV events are published on (bound if it has *, ::, ipc:// or "
       "inproc://, else connected)",
       "empty = off"},
      {"kv-events-topic", String(&Config::kv_events_topic), "", kStartup, "TOPIC",
       "first frame of every KV-event message", "empty = kv@<bind>:<port>@pion"},
      {"kv-events-replay-endpoint", String(&Config::kv_events_replay_endpoint), "", kStartup,
       "ENDPOINT", "ZeroMQ ROUTER endpoint answering replay requests", "empty = off"},
      {"kv-events-buffer-steps", Uint(&Config::kv_events_buffer_steps, 0, 10000000), "10000",
       kStartup, "N", "KV-event batches kept for replay"},
      {"kv-events-hwm", Uint(&Config::kv_events_hwm, 0, 100000000), "100000", kStartup, "N",
       "KV-event messages queued per subscriber before batches are dropped", "0 = no limit"},
      {"kv-events-medium", String(&Config::kv_events_medium, "a medium name"), "SHARED", kStartup,
       "NAME", "the medium KV events report"},
      {"kv-events-max-queue", Uint(&Config::kv_events_max_queue, 1, 100000000), "100000", kStartup,
       "N", "KV-event batches waiting for the publisher thread before drops"},
      {"kv-events-batch-us", Uint(&Config::kv_events_batch_us, 0, 1000), "900", kStartup, "US",
       "longest a worker holds KV events to batch them", "0 = one batch per loop turn"},
      // The disk tier (docs/operations.md "Disk tier", docs/tier_format.md).
      {"tier-dir", String(&Config::tier_dir), "", kStartup, "PATH",
       "directory of the disk tier that string values evicted from RAM move to", "empty = off"},
      {"tier-maxbytes", Bytes(&Config::tier_maxbytes, 0), "0", kRuntime, "BYTES",
       "bound of the disk tier's file (required with tier-dir; at most 16tb)"},
      {"tier-min-value", Bytes(&Config::tier_min_value, 0), "64kb", kRuntime, "BYTES",
       "smaller string values are evicted, not moved to the disk tier"},
      {"tier-write-queue", Bytes(&Config::tier_write_queue, 1), "256mb", kStartup, "BYTES",
       "bytes of values waiting to be written to the disk tier before writers wait"},
      {"tier-io-threads", Uint(&Config::tier_io_threads, 1, 64), "2", kStartup, "N",
       "threads doing the disk tier's writes and its reads of 4 MiB or more"},
      {"tier-ring-depth", Uint(&Config::tier_ring_depth, 0, 4096), "32", kStartup, "N",
       "reads of the disk tier each worker keeps in flight itself (io_uring)",
       "0 = every read on the tier-io-threads"},
  };
  return kOptions;
}

}  // namespace

Config::Config() {
  for (const ConfigOption& o : Table()) {
    Status st = o.codec.set(this, o.name, {o.default_value});
    PION_CHECK_MSG(st.ok(), o.name);
  }
}

const std::vector<ConfigOption>& ConfigOptions() { return Table(); }

const ConfigOption* FindConfigOption(std::string_view name) {
  for (const ConfigOption& o : Table())
    if (EqualsIgnoreCase(name, o.name)) return &o;
  return nullptr;
}

Status ApplySetting(Config* cfg, const std::string& raw_name, const Values& values) {
  if (EqualsIgnoreCase(raw_name, "user")) {
    // An ACL user line (config file, or --user 'NAME RULES...'): kept whole,
    // parsed with the others when the server starts.
    if (values.empty()) return Status::InvalidArgument("option 'user' needs a user name");
    std::string line = "user";
    for (const std::string& v : values) line += " " + v;
    cfg->users.push_back(std::move(line));
    return Status::OK();
  }
  const ConfigOption* opt = FindConfigOption(raw_name);
  if (opt == nullptr) return Status::InvalidArgument("unknown option '" + raw_name + "'");
  return opt->codec.set(cfg, opt->name, values);
}

ConfigSetError ApplyConfigSet(const std::vector<std::pair<std::string, std::string>>& pairs,
                              Config* next) {
  std::set<std::string_view> seen;
  for (const auto& [name, value] : pairs) {
    const ConfigOption* opt = FindConfigOption(name);
    if (opt == nullptr) return {ConfigSetError::kUnknown, name, ""};
    if (!seen.insert(opt->name).second) return {ConfigSetError::kDuplicate, name, ""};
    if (!opt->runtime) {
      // Setting a start-up option to the value it has is a no-op (as Redis).
      Config same = *next;
      if (opt->codec.set(&same, opt->name, {value}).ok() && opt->get(same) == opt->get(*next))
        continue;
      return {ConfigSetError::kImmutable, name, ""};
    }
    Status st = opt->codec.set(next, opt->name, {value});
    if (!st.ok()) return {ConfigSetError::kInvalid, name, std::string(st.message())};
  }
  return {};
}

void CopyRuntimeSettings(const Config& from, Config* to) {
  for (const ConfigOption& o : Table())
    if (o.runtime) o.codec.copy(from, to);
}

std::string FormatPercentile(double p) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%f", p);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace pion::server
