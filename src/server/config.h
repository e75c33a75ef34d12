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
  // The binary fast lane (docs/protocol.md): its port, -1 = port + 1, 0 = off
  // (only with --kvcache; once listening, the port actually bound), and the
  // largest frame body a client may send.
  int fastlane_port = -1;
  uint64_t fastlane_max_frame_len = 1ull << 30;
  // Stage 2 (server-side attention, stage2.md §2; docs/attention.md "Warm and cold slots").
  uint64_t attend_max_slots = 4096;           // runtime: warm (sid, layer) slots
  uint64_t attend_maxmemory = 0;              // runtime: bytes of warm slots, 0 = none
  uint64_t attend_cold_slots = 65536;         // runtime: cold-registry entries
  std::string attend_precision = "f16";       // runtime (new slots): f32, f16 or int8
  int attend_threads = 0;                     // compute pool threads; 0 = number of cores
  uint64_t attend_pool_min_bytes = 1u << 20;  // runtime: queries reading less run inline

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
