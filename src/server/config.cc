#include "server/config.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/strutil.h"
#include "server/net_types.h"

namespace pion::server {

namespace {

std::string U64(uint64_t v) { return std::to_string(v); }
std::string YesNo(bool v) { return v ? "yes" : "no"; }

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

const std::vector<ConfigOption> kOptions = {
    {"port", false, false, [](const Config& c) { return std::to_string(c.port); }},
    {"bind", false, false, [](const Config& c) { return c.bind; }},
    {"dir", false, false, [](const Config& c) { return c.dir; }},
    {"kvcache", false, true, [](const Config& c) { return YesNo(c.kvcache); }},
    {"workers", false, false, [](const Config& c) { return std::to_string(c.workers); }},
    {"max-sessions", false, false, [](const Config& c) { return U64(c.max_sessions); }},
    {"maxmemory", true, false, [](const Config& c) { return U64(c.maxmemory); }},
    {"appendfsync", true, false,
     [](const Config& c) { return std::string(FsyncName(c.appendfsync)); }},
    {"requirepass", false, false, [](const Config& c) { return c.requirepass; }},
    {"loglevel", true, false,
     [](const Config& c) { return std::string(LogLevelName(c.loglevel)); }},
    {"logfile", false, false, [](const Config& c) { return c.logfile; }},
    {"timeout", true, false, [](const Config& c) { return U64(c.timeout); }},
    {"maxclients", true, false, [](const Config& c) { return U64(c.maxclients); }},
    {"proto-max-bulk-len", false, false, [](const Config& c) { return U64(c.proto_max_bulk_len); }},
    {"client-query-buffer-limit", false, false,
     [](const Config& c) { return U64(c.client_query_buffer_limit); }},
    {"client-output-buffer-limit", true, false,
     [](const Config& c) {
       return "normal " + U64(c.client_output_buffer_limit) + " " +
              U64(c.client_output_buffer_soft_limit) + " " +
              U64(c.client_output_buffer_soft_seconds);
     }},
    {"maxmemory-clients", true, false, [](const Config& c) { return U64(c.maxmemory_clients); }},
    {"protected-mode", false, false, [](const Config& c) { return YesNo(c.protected_mode); }},
    {"auto-save-wal-bytes", false, false,
     [](const Config& c) { return U64(c.auto_save_wal_bytes); }},
    {"auto-save-retry-min", false, false,
     [](const Config& c) { return U64(c.auto_save_retry_min); }},
    {"auto-save-retry-max", false, false,
     [](const Config& c) { return U64(c.auto_save_retry_max); }},
    {"wal-repair", false, true, [](const Config& c) { return YesNo(c.wal_repair); }},
    {"appendonly", false, false, [](const Config& c) { return YesNo(c.appendonly); }},
    {"aclfile", false, false, [](const Config& c) { return c.aclfile; }},
    {"acllog-max-len", true, false, [](const Config& c) { return U64(c.acllog_max_len); }},
    {"tls-port", false, false, [](const Config& c) { return std::to_string(c.tls_port); }},
    {"tls-cert-file", true, false, [](const Config& c) { return c.tls_cert_file; }},
    {"tls-key-file", true, false, [](const Config& c) { return c.tls_key_file; }},
    {"tls-ca-cert-file", true, false, [](const Config& c) { return c.tls_ca_cert_file; }},
    {"tls-auth-clients", true, false, [](const Config& c) { return c.tls_auth_clients; }},
    {"tls-protocols", true, false, [](const Config& c) { return c.tls_protocols; }},
    {"tls-ciphers", true, false, [](const Config& c) { return c.tls_ciphers; }},
    {"tls-ciphersuites", true, false, [](const Config& c) { return c.tls_ciphersuites; }},
};

// Splits a config file line into tokens: whitespace separated, with "double"
// or 'single' quotes for values holding spaces (redis.conf rules).
bool SplitLine(const std::string& line, std::vector<std::string>* out) {
  std::string arena;
  std::vector<std::string_view> views;
  if (!SplitInlineArgs(line, &arena, &views)) return false;
  for (auto v : views) out->emplace_back(v);
  return true;
}

Status LoadFile(Config* cfg, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot open config file '" + path + "'");
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::vector<std::string> toks;
    if (!SplitLine(line, &toks))
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": unbalanced quotes");
    if (toks.empty()) continue;
    std::string name = ToLower(toks[0]);
    std::vector<std::string> values(toks.begin() + 1, toks.end());
    Status st = ApplySetting(cfg, name, values);
    if (!st.ok())
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": " +
                                     std::string(st.message()));
  }
  return Status::OK();
}

// A nonzero output limit below this would cut every client that pipelines.
constexpr uint64_t kMinOutputLimit = 1ull << 20;
constexpr uint64_t kMinClientsMemory = 64ull << 20;

Result<uint64_t> OutputLimitArg(const std::string& name, const std::string& v) {
  auto n = ParseBytes(v);
  if (!n.has_value() || (*n != 0 && *n < kMinOutputLimit))
    return Bad(name, v, "0 (no limit) or a byte size of at least 1mb");
  return *n;
}

// "<hard>" (pion's short form) or Redis' "normal <hard> <soft> <seconds>", as
// separate values or as one space-separated value (CONFIG SET).
Status ApplyOutputLimit(Config* cfg, const std::string& name, std::vector<std::string> values) {
  if (values.size() == 1 && values[0].find(' ') != std::string::npos) {
    std::vector<std::string> parts;
    if (!SplitLine(values[0], &parts))
      return Bad(name, values[0], "normal <hard> <soft> <seconds>");
    values = std::move(parts);
  }
  if (values.size() == 1) {
    auto hard = OutputLimitArg(name, values[0]);
    if (!hard.ok()) return hard.status();
    cfg->client_output_buffer_limit = *hard;
    return Status::OK();
  }
  if (values.size() != 4 || !EqualsIgnoreCase(values[0], "normal"))
    return Status::InvalidArgument("option '" + name +
                                   "' takes <bytes> or 'normal <hard> <soft> <seconds>'");
  auto hard = OutputLimitArg(name, values[1]);
  if (!hard.ok()) return hard.status();
  auto soft = OutputLimitArg(name, values[2]);
  if (!soft.ok()) return soft.status();
  auto secs = UintArg(name, values[3], 0, 100ull * 365 * 86400);
  if (!secs.ok()) return secs.status();
  cfg->client_output_buffer_limit = *hard;
  cfg->client_output_buffer_soft_limit = *soft;
  cfg->client_output_buffer_soft_seconds = *secs;
  return Status::OK();
}

}  // namespace

const std::vector<ConfigOption>& ConfigOptions() { return kOptions; }

const ConfigOption* FindConfigOption(std::string_view name) {
  for (const ConfigOption& o : kOptions)
    if (EqualsIgnoreCase(name, o.name)) return &o;
  return nullptr;
}

Status ApplySetting(Config* cfg, const std::string& raw_name,
                    const std::vector<std::string>& values) {
  std::string name = ToLower(raw_name);
  if (name == "user") {
    // A config-file (or --user) ACL line; parsed with the others at start.
    if (values.empty()) return Status::InvalidArgument("option 'user' needs a user name");
    std::string line = "user";
    for (const std::string& v : values) line += " " + v;
    cfg->users.push_back(std::move(line));
    return Status::OK();
  }
  const ConfigOption* opt = FindConfigOption(name);
  if (opt == nullptr) return Status::InvalidArgument("unknown option '" + raw_name + "'");
  if (opt->is_flag && values.empty()) {
    if (name == "kvcache") cfg->kvcache = true;
    if (name == "wal-repair") cfg->wal_repair = true;
    return Status::OK();
  }
  if (name == "client-output-buffer-limit") return ApplyOutputLimit(cfg, name, values);
  if (values.size() != 1) {
    return Status::InvalidArgument("option '" + name + "' takes exactly one value (" +
                                   std::to_string(values.size()) + " given)");
  }
  const std::string& v = values[0];
  if (name == "port") {
    auto r = UintArg(name, v, 0, 65535);
    if (!r.ok()) return r.status();
    cfg->port = static_cast<int>(*r);
  } else if (name == "bind") {
    if (v.empty()) return Bad(name, v, "an IP address");
    cfg->bind = v;
  } else if (name == "dir") {
    if (v.empty()) return Bad(name, v, "a directory");
    cfg->dir = v;
  } else if (name == "kvcache") {
    auto r = BoolArg(name, v);
    if (!r.ok()) return r.status();
    cfg->kvcache = *r;
  } else if (name == "workers") {
    auto r = UintArg(name, v, 0, 64);
    if (!r.ok()) return r.status();
    cfg->workers = static_cast<int>(*r);
  } else if (name == "max-sessions") {
    auto r = UintArg(name, v, 2, 1ull << 32);
    if (!r.ok()) return r.status();
    cfg->max_sessions = *r;
  } else if (name == "maxmemory") {
    auto r = BytesArg(name, v, 0);
    if (!r.ok()) return r.status();
    cfg->maxmemory = *r;
  } else if (name == "appendfsync") {
    if (EqualsIgnoreCase(v, "always"))
      cfg->appendfsync = FsyncPolicy::kAlways;
    else if (EqualsIgnoreCase(v, "everysec"))
      cfg->appendfsync = FsyncPolicy::kEverySec;
    else if (EqualsIgnoreCase(v, "no"))
      cfg->appendfsync = FsyncPolicy::kNo;
    else
      return Bad(name, v, "always, everysec or no");
  } else if (name == "requirepass") {
    cfg->requirepass = v;
  } else if (name == "aclfile") {
    cfg->aclfile = v;
  } else if (name == "acllog-max-len") {
    auto r = UintArg(name, v, 0, 1ull << 20);
    if (!r.ok()) return r.status();
    cfg->acllog_max_len = *r;
  } else if (name == "tls-port") {
    auto r = UintArg(name, v, 0, 65535);
    if (!r.ok()) return r.status();
    cfg->tls_port = static_cast<int>(*r);
  } else if (name == "tls-cert-file") {
    cfg->tls_cert_file = v;
  } else if (name == "tls-key-file") {
    cfg->tls_key_file = v;
  } else if (name == "tls-ca-cert-file") {
    cfg->tls_ca_cert_file = v;
  } else if (name == "tls-auth-clients") {
    std::string l = ToLower(v);
    if (l != "yes" && l != "no" && l != "optional") return Bad(name, v, "yes, no or optional");
    cfg->tls_auth_clients = l;
  } else if (name == "tls-protocols") {
    std::vector<std::string> words;
    std::string w;
    for (char c : v + " ") {
      if (c == ' ') {
        if (!w.empty() && w != "TLSv1.2" && w != "TLSv1.3")
          return Bad(name, v, "TLSv1.2 and/or TLSv1.3");
        w.clear();
      } else {
        w += c;
      }
    }
    cfg->tls_protocols = v;
  } else if (name == "tls-ciphers") {
    cfg->tls_ciphers = v;
  } else if (name == "tls-ciphersuites") {
    cfg->tls_ciphersuites = v;
  } else if (name == "loglevel") {
    LogLevel l;
    if (!ParseLogLevel(ToLower(v), &l)) return Bad(name, v, "debug, verbose, notice or warning");
    cfg->loglevel = l;
  } else if (name == "logfile") {
    cfg->logfile = v;
  } else if (name == "timeout") {
    auto r = UintArg(name, v, 0, 100ull * 365 * 86400);
    if (!r.ok()) return r.status();
    cfg->timeout = *r;
  } else if (name == "maxclients") {
    auto r = UintArg(name, v, 1, 1000000);
    if (!r.ok()) return r.status();
    cfg->maxclients = *r;
  } else if (name == "proto-max-bulk-len") {
    auto r = BytesArg(name, v, 1);
    if (!r.ok()) return r.status();
    cfg->proto_max_bulk_len = *r;
  } else if (name == "client-query-buffer-limit") {
    auto r = BytesArg(name, v, 1024);
    if (!r.ok()) return r.status();
    cfg->client_query_buffer_limit = *r;
  } else if (name == "maxmemory-clients") {
    auto r = BytesArg(name, v, 0);
    if (!r.ok()) return r.status();
    if (*r != 0 && *r < kMinClientsMemory)
      return Bad(name, v, "0 (no limit) or a byte size of at least 64mb");
    cfg->maxmemory_clients = *r;
  } else if (name == "protected-mode") {
    auto r = BoolArg(name, v);
    if (!r.ok()) return r.status();
    cfg->protected_mode = *r;
  } else if (name == "auto-save-wal-bytes") {
    auto r = BytesArg(name, v, 0);
    if (!r.ok()) return r.status();
    cfg->auto_save_wal_bytes = *r;
  } else if (name == "auto-save-retry-min") {
    auto r = UintArg(name, v, 1, 86400);
    if (!r.ok()) return r.status();
    cfg->auto_save_retry_min = *r;
  } else if (name == "auto-save-retry-max") {
    auto r = UintArg(name, v, 1, 86400);
    if (!r.ok()) return r.status();
    cfg->auto_save_retry_max = *r;
  } else if (name == "wal-repair") {
    auto r = BoolArg(name, v);
    if (!r.ok()) return r.status();
    cfg->wal_repair = *r;
  } else if (name == "appendonly") {
    auto r = BoolArg(name, v);
    if (!r.ok()) return r.status();
    cfg->appendonly = *r;
  }
  return Status::OK();
}

std::string ConfigUsage() {
  return "Usage: pion-server [/path/to/pion.conf] [--option value ...]\n"
         "\n"
         "  --port N                       TCP port (default 1974)\n"
         "  --bind ADDR                    listening address (default 127.0.0.1)\n"
         "  --dir PATH                     data directory, created if missing (default .)\n"
         "  --kvcache                      enable the KV.PREFIX / V.* commands\n"
         "  -w, --workers N                event-loop threads (default: cores, at most 64)\n"
         "  --max-sessions N               session cap; a namespace uses two (default 256)\n"
         "  --maxmemory BYTES              budget for stored K/V, e.g. 4gb (default 0 = none)\n"
         "  --appendfsync always|everysec|no   WAL fsync policy (default everysec)\n"
         "  --requirepass PASS             require AUTH\n"
         "  --loglevel debug|verbose|notice|warning   (default notice)\n"
         "  --logfile PATH                 log file (default stderr)\n"
         "  --timeout SECONDS              close idle clients (default 0 = never)\n"
         "  --maxclients N                 connection cap (default 10000)\n"
         "  --proto-max-bulk-len BYTES     largest bulk string (default 1gb)\n"
         "  --client-query-buffer-limit BYTES  largest pending command (default 2gb)\n"
         "  --client-output-buffer-limit 'normal HARD SOFT SECONDS' (or HARD): unsent replies\n"
         "                                 before disconnect (default normal 1gb 0 0)\n"
         "  --maxmemory-clients BYTES      all clients' buffers together (default 2gb, 0 = none)\n"
         "  --protected-mode yes|no        refuse remote clients without requirepass (default "
         "yes)\n"
         "  --auto-save-wal-bytes BYTES    WAL size that triggers a snapshot (default 0 = auto)\n"
         "  --auto-save-retry-min SECONDS  first retry of a failed automatic snapshot (default 1)\n"
         "  --auto-save-retry-max SECONDS  longest retry interval, doubling from min (default "
         "300)\n"
         "  --wal-repair                   start even if the WAL is corrupt mid-file\n"
         "  --appendonly yes|no            WAL and snapshots for --kvcache (default yes)\n"
         "  --user 'NAME RULES...'         an ACL user (repeatable; config file: user NAME RULES...)\n"
         "  --aclfile PATH                 ACL users file (ACL LOAD / SAVE; not with user lines)\n"
         "  --acllog-max-len N             ACL LOG entries kept (default 128)\n"
         "  --tls-port N                   TLS listener (default 0 = none; --port 0: TLS only)\n"
         "  --tls-cert-file PATH           server certificate (PEM)\n"
         "  --tls-key-file PATH            its private key (PEM)\n"
         "  --tls-ca-cert-file PATH        CA that signs client certificates\n"
         "  --tls-auth-clients yes|no|optional   client certificate required (default yes)\n"
         "  --tls-protocols 'TLSv1.2 TLSv1.3'    protocols allowed (default both)\n"
         "  --tls-ciphers LIST             TLS 1.2 ciphers (default OpenSSL's)\n"
         "  --tls-ciphersuites LIST        TLS 1.3 cipher suites (default OpenSSL's)\n"
         "  --help, --version\n"
         "\n"
         "A config file holds the same names without dashes, one 'name value' per line.\n";
}

Result<Config> ParseConfig(int argc, char** argv) {
  Config cfg;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') {
    cfg.config_file = argv[1];
    PION_RETURN_IF_ERROR(LoadFile(&cfg, cfg.config_file));
    i = 2;
  }
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      cfg.show_help = true;
      continue;
    }
    if (a == "-v" || a == "--version") {
      cfg.show_version = true;
      continue;
    }
    std::string name;
    std::vector<std::string> values;
    if (a == "-w") {
      name = "workers";
    } else if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        values.push_back(name.substr(eq + 1));
        name.resize(eq);
      }
    } else {
      return Status::InvalidArgument("unexpected argument '" + a +
                                     "' (options start with --; the config file comes first)");
    }
    const ConfigOption* opt = FindConfigOption(name);
    if (opt == nullptr && name != "user")
      return Status::InvalidArgument("unknown option '" + a + "' (see --help)");
    if (values.empty()) {
      if (opt != nullptr && opt->is_flag) {
        // A flag takes an explicit yes/no only if one follows.
        if (i + 1 < argc && BoolArg(name, argv[i + 1]).ok()) values.push_back(argv[++i]);
      } else if (name == "client-output-buffer-limit" && i + 4 < argc &&
                 EqualsIgnoreCase(argv[i + 1], "normal")) {
        for (int k = 0; k < 4; ++k) values.push_back(argv[++i]);
      } else {
        if (i + 1 >= argc) return Status::InvalidArgument("option '" + a + "' needs a value");
        values.push_back(argv[++i]);
      }
    }
    Status st = ApplySetting(&cfg, name, values);
    if (!st.ok()) return st;
  }
  return cfg;
}

}  // namespace pion::server
