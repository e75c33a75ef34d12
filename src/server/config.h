// Config: every server setting, filled from a config file (first positional
// argument, redis.conf style "name value" lines) and then the command line
// (--name value), validated once.
//
// Each setting is one row of the option table (config.cc, kOptions): its name,
// how its value is parsed and printed (which Config field, limits), its
// default, whether CONFIG SET may change it, and its --help line. The table
// generates the command-line and config-file parser, the usage text, CONFIG
// GET / SET's validation, and the defaults a Config is constructed with;
// config_table_test checks that pion.conf lists every row with its default.
// Settings marked runtime are read by the workers through relaxed-atomic
// accessors on Server (Server::SetConfig publishes them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "kvproto/config_error.h"

namespace pion::server {

enum class FsyncPolicy : uint8_t { kAlways, kEverySec, kNo };

// The values; defaults come from the option table (Config() applies them).
struct Config {
  Config();

  int port = 0;
  std::string bind;
  std::string dir;
  bool kvcache = false;
  int workers = 0;  // 0 = number of cores (at most 64)
  uint64_t max_sessions = 0;
  uint64_t max_chain_length = 0;
  uint64_t maxmemory = 0;                            // runtime
  std::string maxmemory_policy = "allkeys-lru";      // runtime; store::ParseEvictPolicy names
  uint64_t maxmemory_samples = 0;                    // runtime: namespaces sampled per eviction
  uint64_t lfu_log_factor = 0;                       // runtime: LFU counter growth (Redis's)
  uint64_t lfu_decay_time = 0;                       // runtime: minutes per LFU decay step
  uint64_t max_block_leases = 0;                     // runtime: live KV.BLOCK.MATCH ... PIN leases
  FsyncPolicy appendfsync = FsyncPolicy::kEverySec;  // runtime
  std::string requirepass;
  LogLevel loglevel = LogLevel::kNotice;  // runtime
  std::string logfile;
  bool daemonize = false;  // detach at start (stdio to /dev/null)
  uint64_t proto_max_bulk_len = 0;
  uint64_t client_query_buffer_limit = 0;
  uint64_t max_multibulk_len = 1ull << 20;  // arguments per command (fixed, not an option)
  // client-output-buffer-limit normal <hard> <soft> <soft-seconds> (0 = none).
  uint64_t client_output_buffer_limit = 0;         // hard: disconnect at once
  uint64_t client_output_buffer_soft_limit = 0;    // soft: for longer than ...
  uint64_t client_output_buffer_soft_seconds = 0;  // ... this many seconds
  // The same for the `pubsub` class (clients subscribed to a channel or
  // pattern) and the `replica` class (kept for CONFIG GET; pion has no replicas).
  uint64_t pubsub_output_buffer_limit = 0;
  uint64_t pubsub_output_buffer_soft_limit = 0;
  uint64_t pubsub_output_buffer_soft_seconds = 0;
  uint64_t replica_output_buffer_limit = 0;
  uint64_t replica_output_buffer_soft_limit = 0;
  uint64_t replica_output_buffer_soft_seconds = 0;
  // notify-keyspace-events as NotifyClass bits (server/notify.h); runtime.
  uint32_t notify_keyspace_events = 0;
  // acl-pubsub-default: whether new users start with allchannels (else resetchannels).
  bool acl_pubsub_allchannels = false;
  // All clients' buffers together (query, big arguments, unsent replies):
  // bytes, or (maxmemory_clients_percent > 0) that percentage of maxmemory.
  uint64_t maxmemory_clients = 0;
  uint64_t maxmemory_clients_percent = 0;
  // Large blocks of dropped values and big arguments kept for reuse (base/owned_buffer.h).
  uint64_t buffer_recycle_bytes = 0;
  bool protected_mode = false;
  bool cluster_emulated = false;  // answer CLUSTER SLOTS/... as a one-node cluster
  uint64_t maxclients = 0;
  uint64_t timeout = 0;              // idle seconds before closing a client; 0 = never
  uint64_t auto_save_wal_bytes = 0;  // 0 = max(64 MiB, last snapshot size)
  // A failed automatic snapshot (a full disk) is retried after min seconds,
  // then twice as long each time, at most max.
  uint64_t auto_save_retry_min = 0;
  uint64_t auto_save_retry_max = 0;
  bool wal_repair = false;
  uint64_t wal_preallocate_bytes = 64ull << 20;  // disk space kept ahead of the WAL's end
  bool wal_recycle = true;  // reuse the retired WAL file at the next compaction (wal_format.md §6)
  bool snapshot_mmap = true;  // load the snapshot by mapping it (docs/snapshot_format.md §5)
  // Threads that verify a mapped snapshot's checksums at start-up; 0 = one per core, at most 8.
  uint64_t snapshot_verify_threads = 0;
  bool appendonly = false;  // write-ahead log + snapshots (--kvcache); no = memory only
  // Save points (Redis's `save`): a background snapshot once `changes` writes
  // were logged and `seconds` passed since the last snapshot, for any point
  // (seconds, changes). Empty = none. With points set, FLUSHALL saves at once.
  std::vector<std::pair<uint64_t, uint64_t>> save_points;
  // Redis's hidden test setting (microseconds to wait per key loaded): kept
  // and shown by CONFIG GET key-load-delay; pion's loading does not use it.
  int64_t key_load_delay = 0;
  // The binary fast lane (docs/protocol.md): its port, -1 = port + 1, 0 = off
  // (only with --kvcache; once listening, the port actually bound), and the
  // largest frame body a client may send.
  int fastlane_port = 0;
  uint64_t fastlane_max_frame_len = 0;
  // Server-side attention (docs/attention.md §5a).
  uint64_t attend_max_slots = 0;       // runtime: warm (sid, layer) slots
  uint64_t attend_maxmemory = 0;       // runtime: bytes of warm slots, 0 = none
  uint64_t attend_cold_slots = 0;      // runtime: cold-registry entries
  std::string attend_precision;        // runtime (new slots): f32, f16 or int8
  int attend_threads = 0;              // compute pool threads; 0 = number of cores
  uint64_t attend_pool_min_bytes = 0;  // runtime: queries reading less run inline
  // Observability (docs/operations.md).
  int64_t slowlog_log_slower_than = 10000;  // microseconds; 0 logs every command, <0 none
  uint64_t slowlog_max_len = 128;
  // runtime: keys the client-side caching table remembers (0 = no bound)
  uint64_t tracking_table_max_keys = 1000000;
  uint64_t latency_monitor_threshold = 0;  // milliseconds; 0 = off
  bool latency_tracking = true;            // runtime: per-command latency histograms
  std::vector<double> latency_tracking_percentiles = {50.0, 99.0, 99.9};  // INFO latencystats
  int metrics_port = 0;  // Prometheus GET /metrics; 0 = off
  // KV events for routers (docs/kv_events.md); an empty endpoint is off.
  std::string kv_events_endpoint;
  std::string kv_events_topic;  // empty: kv@<bind>:<port>@pion
  std::string kv_events_replay_endpoint;
  uint64_t kv_events_buffer_steps = 10000;
  uint64_t kv_events_hwm = 100000;
  std::string kv_events_medium = "SHARED";
  uint64_t kv_events_max_queue = 100000;
  uint64_t kv_events_batch_us = 900;  // longest a worker holds KV events back
  // The disk tier (docs/operations.md "Disk tier"); an empty dir is off.
  std::string tier_dir;
  uint64_t tier_maxbytes = 0;           // runtime
  uint64_t tier_min_value = 64 * 1024;  // runtime
  uint64_t tier_write_queue = 256ull << 20;
  uint64_t tier_io_threads = 2;
  uint64_t tier_ring_depth = 32;  // per worker; 0: reads on the I/O threads

  // ACL (docs/security.md): `user <name> <rules...>` lines of the config
  // file (each kept whole), or an ACL file of such lines (not both).
  std::vector<std::string> users;
  std::string aclfile;
  uint64_t acllog_max_len = 128;  // ACL LOG entries kept

  // TLS (docs/security.md). tls_port 0 = no TLS listener; port 0 with a
  // tls_port = TLS only. Cert, key and CA files are reloaded by CONFIG SET.
  int tls_port = 0;
  std::string tls_cert_file;             // runtime
  std::string tls_key_file;              // runtime
  std::string tls_ca_cert_file;          // runtime
  std::string tls_auth_clients = "yes";  // yes | no | optional; runtime
  std::string tls_protocols;             // "TLSv1.2 TLSv1.3" (empty = both); runtime
  std::string tls_ciphers;               // TLS 1.2 cipher list (empty = OpenSSL's default); runtime
  std::string tls_ciphersuites;          // TLS 1.3 suites (empty = default); runtime
  bool tls_fastlane = false;             // the fast-lane listener speaks TLS (startup)

  // Not settings: what the command line asked for besides them.
  std::string config_file;  // the config file read, if any (INFO config_file)
  bool show_help = false;
  bool show_version = false;
};

// How one option's value is read into and printed from a Config (built by the
// helpers in config.cc: an integer field with limits, a byte size, yes/no, ...).
struct ConfigCodec {
  using SetFn =
      std::function<Status(Config*, const std::string& name, const std::vector<std::string>&)>;
  // Parses `values` (one value; a flag may have none) into the field. Errors
  // name the option and the value.
  SetFn set;
  // The value as CONFIG GET prints it; it parses back through set.
  std::function<std::string(const Config&)> get;
  // Copies the field(s) from one Config to another (CONFIG SET's apply step).
  std::function<void(const Config& from, Config* to)> copy;
  bool is_flag = false;  // a boolean that may be given without a value (--kvcache)
  // On the command line the value may also be this word and three more
  // arguments ("normal" for client-output-buffer-limit); nullptr for none.
  const char* list_keyword = nullptr;
};

// One row of the option table.
struct ConfigOption {
  const char* name;  // lower case, as in pion.conf: "maxmemory"
  ConfigCodec codec;
  const char* default_value;  // as pion.conf writes it: "1gb", "normal 1gb 0 0"
  bool runtime;               // CONFIG SET may change it
  const char* arg;            // --help's value placeholder ("N", "BYTES"); "" for a flag
  const char* help;           // --help's description
  // What --help says the default is, when not default_value ("" = say nothing).
  const char* shown_default = nullptr;
  char short_flag = 0;  // a one-letter alias ('w' for -w), 0 for none
  // Redis's hidden settings: CONFIG GET answers them by exact name only,
  // never for a pattern.
  bool hidden = false;

  bool is_flag() const { return codec.is_flag; }
  std::string get(const Config& c) const { return codec.get(c); }
};

// Every setting, in pion.conf order.
const std::vector<ConfigOption>& ConfigOptions();
// A percentile as Redis prints it (%f with the trailing zeros and dot removed:
// "50", "99.9"): CONFIG GET latency-tracking-info-percentiles, INFO latencystats.
std::string FormatPercentile(double p);
// Case-insensitive; nullptr if unknown.
const ConfigOption* FindConfigOption(std::string_view name);
// "pion-server --help" text.
std::string ConfigUsage();

// Parses argv (argv[1] may be a config file path). Errors name the option.
Result<Config> ParseConfig(int argc, char** argv);
// Applies one "name value" setting (config file line, --name value, CONFIG SET).
Status ApplySetting(Config* cfg, const std::string& name, const std::vector<std::string>& values);

// CONFIG SET's validation: applies every (name, value) pair to `*next` (a copy
// of the current config), refusing unknown, repeated and start-up-only names
// and bad values. On error `*next` is partly changed and must be dropped.
ConfigSetError ApplyConfigSet(const std::vector<std::pair<std::string, std::string>>& pairs,
                              Config* next);
// Copies every runtime setting from `from` into `to` (CONFIG SET's apply).
void CopyRuntimeSettings(const Config& from, Config* to);

}  // namespace pion::server
