// Config: every server setting, filled from a config file (first positional
// argument, redis.conf style "name value" lines) and then the command line
// (--name value), validated once. Settings marked "runtime" can change through
// CONFIG SET and are read with relaxed atomics by the workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/status.h"

namespace pion::server {

enum class FsyncPolicy : uint8_t { kAlways, kEverySec, kNo };

struct Config {
  int port = 1974;
  std::string bind = "127.0.0.1";
  std::string dir = ".";
  bool kvcache = false;
  int workers = 0;  // 0 = number of cores (at most 64)
  uint64_t max_sessions = 256;
  uint64_t maxmemory = 0;                            // runtime
  FsyncPolicy appendfsync = FsyncPolicy::kEverySec;  // runtime
  std::string requirepass;
  LogLevel loglevel = LogLevel::kNotice;  // runtime
  std::string logfile;
  uint64_t proto_max_bulk_len = 1ull << 30;
  uint64_t max_multibulk_len = 1ull << 20;  // arguments per command
  uint64_t client_query_buffer_limit = 2ull << 30;
  // client-output-buffer-limit normal <hard> <soft> <soft-seconds> (0 = none).
  uint64_t client_output_buffer_limit = 1ull << 30;  // hard: disconnect at once
  uint64_t client_output_buffer_soft_limit = 0;      // soft: for longer than ...
  uint64_t client_output_buffer_soft_seconds = 0;    // ... this many seconds
  // All clients' buffers together (query, big arguments, unsent replies).
  uint64_t maxmemory_clients = 2ull << 30;
  bool protected_mode = true;
  uint64_t maxclients = 10000;
  uint64_t timeout = 0;              // idle seconds before closing a client; 0 = never
  uint64_t auto_save_wal_bytes = 0;  // 0 = max(64 MiB, last snapshot size)
  // A failed automatic snapshot (a full disk) is retried after min seconds,
  // then twice as long each time, at most max.
  uint64_t auto_save_retry_min = 1;
  uint64_t auto_save_retry_max = 300;
  bool wal_repair = false;
  bool appendonly = true;  // write-ahead log + snapshots (--kvcache); no = memory only

  // ACL (docs/security.md): `user <name> <rules...>` lines of the config
  // file (each kept whole), or an ACL file of such lines (not both).
  std::vector<std::string> users;
  std::string aclfile;
  uint64_t acllog_max_len = 128;  // ACL LOG entries kept

  // TLS (docs/security.md). tls_port 0 = no TLS listener; port 0 with a
  // tls_port = TLS only. Cert, key and CA files are reloaded by CONFIG SET.
  int tls_port = 0;
  std::string tls_cert_file;     // runtime
  std::string tls_key_file;      // runtime
  std::string tls_ca_cert_file;  // runtime
  std::string tls_auth_clients = "yes";  // yes | no | optional; runtime
  std::string tls_protocols;             // "TLSv1.2 TLSv1.3" (empty = both); runtime
  std::string tls_ciphers;               // TLS 1.2 cipher list (empty = OpenSSL's default); runtime
  std::string tls_ciphersuites;          // TLS 1.3 suites (empty = default); runtime

  // Not settings: what the command line asked for besides them.
  std::string config_file;  // the config file read, if any (INFO config_file)
  bool show_help = false;
  bool show_version = false;
};

// One setting as CONFIG GET / CONFIG SET and the config file know it.
struct ConfigOption {
  const char* name;  // lower case, as in pion.conf: "maxmemory"
  bool runtime;      // CONFIG SET may change it
  bool is_flag;      // a boolean that may be given without a value (--kvcache)
  std::string (*get)(const Config&);
};

// Every setting, in pion.conf order.
const std::vector<ConfigOption>& ConfigOptions();
// Case-insensitive; nullptr if unknown.
const ConfigOption* FindConfigOption(std::string_view name);
// "pion-server --help" text.
std::string ConfigUsage();

// Parses argv (argv[1] may be a config file path). Errors name the option.
Result<Config> ParseConfig(int argc, char** argv);
// Applies one "name value" setting (config file line, --name value, CONFIG SET).
Status ApplySetting(Config* cfg, const std::string& name, const std::vector<std::string>& values);

}  // namespace pion::server
