// INFO [section ...]: Redis-style "# Section" blocks of "field:value" lines.
// Sections: server, clients, memory, persistence, stats, replication, cpu,
// commandstats, errorstats, latencystats, pion, cluster, keyspace; "default"
// (or no argument) is all but commandstats and latencystats, "all" and
// "everything" are all of them.
// RESP3 gets a verbatim string, RESP2 a bulk string. Counters are
// server-wide (every worker).
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "net/client_info.h"
#include "persist/persistence.h"
#include "server/acl.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "server/kv_events.h"
#include "server/metrics.h"
#include "store/key_ops.h"

#ifndef PION_BUILD_ID
#define PION_BUILD_ID "unknown"
#endif

namespace pion::server {

namespace {

// Who asks: the worker (the per-worker lines of # Pion) and the ACL user (# Keyspace
// counts only what that user may read).
struct InfoFor {
  int worker;
  const AclUser* user;
};

std::string Fixed2(double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

std::string Seconds6(const timeval& tv) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%ld.%06ld", static_cast<long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return buf;
}

std::string Human(uint64_t bytes) {
  char buf[32];
  double b = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof(buf), "%lluB", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2fK", b / 1024);
  else if (bytes < (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2fM", b / (1 << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.2fG", b / (1ull << 30));
  return buf;
}

void ServerSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  static const std::string os = [] {
    utsname u{};
    if (::uname(&u) != 0) return std::string("Linux");
    return std::string(u.sysname) + " " + u.release + " " + u.machine;
  }();
  uint64_t up = (MonotonicUs() - s.control().start_time_us()) / 1000000;
  InfoField(out, "redis_version", std::string("7.0.0"));
  InfoField(out, "pion_version", std::string(PION_VERSION "+" PION_BUILD_ID));
  InfoField(out, "redis_mode", std::string("standalone"));
  InfoField(out, "os", os);
  InfoField(out, "arch_bits", uint64_t{64});
  InfoField(out, "multiplexing_api", std::string("epoll"));
  InfoField(out, "gcc_version",
            std::string(__VERSION__).substr(0, std::string(__VERSION__).find(' ')));
  InfoField(out, "process_id", static_cast<uint64_t>(::getpid()));
  InfoField(out, "run_id", s.control().run_id());
  InfoField(out, "tcp_port", static_cast<uint64_t>(s.control().port()));
  InfoField(out, "fastlane_port", static_cast<uint64_t>(s.control().fastlane_port()));
  InfoField(out, "server_time_usec", UnixMicros());
  InfoField(out, "uptime_in_seconds", up);
  InfoField(out, "uptime_in_days", up / 86400);
  InfoField(out, "workers", static_cast<uint64_t>(s.control().num_workers()));
  InfoField(out, "kvcache", std::string(s.store() != nullptr ? "yes" : "no"));
  InfoField(out, "config_file", s.config().config_file);
}

void ClientsSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  InfoField(out, "connected_clients", s.clients().connected());
  InfoField(out, "maxclients", s.settings().maxclients());
  InfoField(out, "blocked_clients", uint64_t{0});
  InfoField(out, "tracking_clients", s.tracking().clients());
}

void MemorySection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  uint64_t rss = ResidentSetBytes();
  // used_memory is what maxmemory bounds (the data budget); what the
  // allocator holds besides (buffers, connections) is allocator_allocated.
  uint64_t used = s.memory().UsedMemory();
  uint64_t peak = s.memory().used_memory_peak();
  uint64_t alloc = s.memory().AllocatorMemory();
  uint64_t max = s.settings().maxmemory();
  InfoField(out, "used_memory", used);
  InfoField(out, "used_memory_human", Human(used));
  InfoField(out, "used_memory_rss", rss);
  InfoField(out, "used_memory_rss_human", Human(rss));
  InfoField(out, "used_memory_peak", peak);
  InfoField(out, "used_memory_peak_human", Human(peak));
  InfoField(out, "used_memory_dataset", used);
  InfoField(out, "allocator_allocated", alloc);
  InfoField(out, "allocator_allocated_human", Human(alloc));
  InfoField(out, "allocator_peak", s.memory().allocator_peak());
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.2f",
                alloc > 0 ? static_cast<double>(rss) / static_cast<double>(alloc) : 0.0);
  InfoField(out, "mem_fragmentation_ratio", std::string(ratio));
  InfoField(out, "maxmemory", max);
  InfoField(out, "maxmemory_human", Human(max));
  InfoField(out, "maxmemory_policy",
            std::string(s.store() != nullptr ? store::EvictPolicyName(s.store()->evict_policy())
                                             : "allkeys-lru"));
  // Client buffers (query, big arguments, unsent replies): maxmemory-clients.
  InfoField(out, "mem_clients_normal", s.clients().memory());
  InfoField(out, "maxmemory_clients", s.settings().maxmemory_clients());
  if (store::Store* st = s.store()) {
    store::StoreStats ss = st->Stats();
    InfoField(out, "vstore_bytes", ss.bytes);
    InfoField(out, "vstore_bytes_human", Human(ss.bytes));
  }
  InfoField(out, "mem_allocator", std::string("libc"));
  InfoField(out, "lazyfree_pending_objects", uint64_t{0});  // values are freed at once
}

// INFO persistence with the durability layer: its snapshot and WAL figures,
// under the names Redis gives the same facts (rdb_*, aof_*) and pion's own.
void PersistenceFields(CommandEnv& env, persist::Persistence& p, std::string* out) {
  persist::PersistStats s = p.Stats();
  InfoField(out, "rdb_changes_since_last_save", s.wal_appended);
  // A KV.PREFIX.SAVE counts from the moment it is accepted (queued for the
  // background thread) until just before its reply.
  // A BGREWRITEAOF is the same snapshot, reported as Redis does: as an AOF
  // rewrite, not a BGSAVE.
  bool aofrw = env.saves().aof_rewrite_running();
  bool saving = (s.save_in_progress || env.saves().save_running()) && !aofrw;
  InfoField(out, "rdb_bgsave_in_progress", uint64_t{saving ? 1u : 0u});
  InfoField(out, "rdb_last_save_time", static_cast<uint64_t>(s.last_save_unix));
  InfoField(out, "rdb_last_bgsave_status", std::string(s.last_save_ok ? "ok" : "err"));
  InfoField(out, "rdb_saves", s.saves);
  InfoField(out, "rdb_last_save_seconds", std::to_string(s.last_save_seconds));
  InfoField(out, "rdb_snapshot_bytes", s.snapshot_bytes);
  InfoField(out, "aof_enabled", uint64_t{s.wal_enabled ? 1u : 0u});
  InfoField(out, "aof_rewrite_in_progress", uint64_t{aofrw ? 1u : 0u});
  InfoField(out, "aof_rewrite_scheduled", uint64_t{0});
  InfoField(out, "aof_current_size", s.wal_bytes);
  InfoField(out, "aof_last_write_status", std::string(s.wal_broken ? "err" : "ok"));
  InfoField(out, "wal_generation", s.wal_generation);
  InfoField(out, "wal_appended", s.wal_appended);
  InfoField(out, "wal_replayed", s.wal_replayed);
  InfoField(out, "wal_last_lsn", s.last_lsn);
  InfoField(out, "wal_durable_lsn", s.durable_lsn);
  InfoField(out, "auto_save_wal_bytes", s.auto_save_threshold);
  InfoField(out, "auto_save_failures", s.auto_save_failures);
  InfoField(out, "wal_resumes", s.wal_resumes);
  InfoField(out, "loading_last_seconds", std::to_string(s.recovery_seconds));
  InfoField(out, "loading_snapshot_mapped", uint64_t{s.snapshot_mapped ? 1u : 0u});
}

void PersistenceSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  InfoField(out, "loading", uint64_t{s.control().loading() ? 1u : 0u});
  InfoField(out, "async_loading", uint64_t{0});
  if (persist::Persistence* p = s.persistence()) {
    if (!s.control().loading()) PersistenceFields(s, *p, out);
  } else if (store::Store* st = s.store()) {
    // Without persistence nothing is ever saved: every change since start.
    InfoField(out, "rdb_changes_since_last_save", st->KeyStats().changes);
  }
}

// The keyspace counters of INFO stats (string keys and namespaces together).
void KeyspaceStatsFields(CommandEnv& s, std::string* out) {
  store::KeyspaceStats k;
  if (store::Store* st = s.store()) k = st->KeyStats();
  InfoField(out, "expired_keys", k.expired);
  InfoField(out, "evicted_keys", k.evicted_keys);
  // Clients closed because client buffers passed maxmemory-clients (client_eviction.cc).
  InfoField(out, "evicted_clients", s.client_eviction().evicted_clients());
  InfoField(out, "keyspace_hits", k.hits);
  InfoField(out, "keyspace_misses", k.misses);
  // pion: large values kept in the buffer they were received into (no copy).
  InfoField(out, "string_values_adopted", store::StrValue::adopted_total());
}

void StatsSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  ServerStats st = s.control().Stats();
  InfoField(out, "total_connections_received", st.connections_received);
  InfoField(out, "total_commands_processed", st.commands_processed);
  InfoField(out, "instantaneous_ops_per_sec", s.observability().instantaneous_ops());
  InfoField(out, "total_net_input_bytes", st.net_input_bytes);
  InfoField(out, "total_net_output_bytes", st.net_output_bytes);
  InfoField(out, "instantaneous_input_kbps", Fixed2(s.observability().instantaneous_input_kbps()));
  InfoField(out, "instantaneous_output_kbps",
            Fixed2(s.observability().instantaneous_output_kbps()));
  InfoField(out, "rejected_connections", st.rejected_connections);
  InfoField(out, "client_output_buffer_limit_disconnections", st.output_limit_disconnections);
  InfoField(out, "total_protocol_errors", st.protocol_errors);
  InfoField(out, "tls_handshake_failures", st.tls_handshake_failures);
  // Client-side caching (server/tracking.h).
  InfoField(out, "tracking_total_keys", s.tracking().total_keys());
  InfoField(out, "tracking_total_items", s.tracking().total_items());
  InfoField(out, "tracking_total_prefixes", s.tracking().total_prefixes());
  InfoField(out, "total_error_replies", st.error_replies);
  KeyspaceStatsFields(s, out);
  // Background snapshots started (BGSAVE, BGREWRITEAOF, save points, the WAL's
  // automatic compactions): what Redis counts as forks, run on a thread here.
  uint64_t forks = s.saves().background_saves();
  if (persist::Persistence* p = s.persistence()) forks += p->Stats().auto_save_attempts;
  InfoField(out, "total_forks", forks);
}

// The disk tier (docs/operations.md "Disk tier"): zeros while off. The read
// latency as the upper bounds (us) of the histogram buckets holding p50, p99.
void AppendTierInfo(CommandEnv& s, std::string* out) {
  store::Store::TierStats t = s.store() ? s.store()->tier_stats() : store::Store::TierStats{};
  InfoField(out, "tier_enabled", t.enabled ? 1 : 0);
  InfoField(out, "tier_bytes", t.bytes);
  InfoField(out, "tier_maxbytes", t.max_bytes);
  InfoField(out, "tier_entries", t.entries);
  InfoField(out, "tier_reads", t.reads);
  InfoField(out, "tier_read_bytes", t.read_bytes);
  InfoField(out, "tier_ring_reads", t.ring_reads);
  InfoField(out, "tier_writes", t.writes);
  InfoField(out, "tier_write_bytes", t.write_bytes);
  InfoField(out, "tier_promotions", t.promotions);
  InfoField(out, "tier_evictions", t.evictions);
  InfoField(out, "tier_errors", t.errors);
  InfoField(out, "tier_write_backlog_bytes", t.backlog_bytes);
  uint64_t total = 0;
  for (uint64_t c : t.read_latency) total += c;
  auto quantile = [&](double q) -> uint64_t {
    if (total == 0) return 0;
    uint64_t cum = 0;
    for (size_t i = 0; i < t.read_latency.size(); ++i) {
      cum += t.read_latency[i];
      if (static_cast<double>(cum) >= q * static_cast<double>(total)) return uint64_t{1} << i;
    }
    return uint64_t{1} << (t.read_latency.size() - 1);
  };
  InfoField(out, "tier_read_latency_p50_us", quantile(0.5));
  InfoField(out, "tier_read_latency_p99_us", quantile(0.99));
}

void PionSection(CommandEnv& s, const InfoFor& who, std::string* out) {
  ReceiptSnapshot r = s.receipt().Read();
  InfoField(out, "stats_scope", std::string("server"));
  InfoField(out, "worker_id", static_cast<uint64_t>(who.worker));
  InfoField(out, "kvprefix_hits", r.hits);
  InfoField(out, "kvprefix_misses", r.misses);
  InfoField(out, "kvprefix_hits_measured", r.hits_measured);
  InfoField(out, "kvprefix_tokens_served", r.tokens_served);
  InfoField(out, "kvprefix_bytes_served", r.bytes_served);
  InfoField(out, "prefill_seconds_avoided", Receipt::SecondsText(r.prefill_us_saved));
  InfoField(out, "prefill_seconds_avoided_measured", Receipt::SecondsText(r.prefill_us_measured));
  InfoField(out, "semantic_hits", r.semantic_hits);
  InfoField(out, "semantic_misses", r.semantic_misses);
  InfoField(out, "moe_hits", r.moe_hits);
  InfoField(out, "moe_misses", r.moe_misses);
  InfoField(out, "vector_queries", r.vector_queries);
  if (store::Store* st = s.store()) {
    store::StoreStats ss = st->Stats();
    InfoField(out, "registered_prefixes", ss.registered_prefixes);
    InfoField(out, "total_prefix_tokens", ss.total_prefix_tokens);
    InfoField(out, "vstore_sessions", ss.sessions);
    InfoField(out, "vstore_max_sessions", ss.max_sessions);
    InfoField(out, "vstore_bytes", ss.bytes);
    InfoField(out, "vstore_max_bytes", ss.max_bytes);
    InfoField(out, "vstore_evictions", ss.evictions);
    InfoField(out, "vstore_total_fetches", ss.total_fetches);
    store::Store::PinStats ps = st->PinStatsNow();
    InfoField(out, "pinned_keys", ps.keys);
    InfoField(out, "pinned_bytes", ps.bytes);
    InfoField(out, "leases", ps.leases);
  }
  AppendTierInfo(s, out);
  // KV events (docs/kv_events.md): zeros while off.
  events::KvEventStats ev = s.kv_events() ? s.kv_events()->Stats() : events::KvEventStats{};
  InfoField(out, "kv_events_published", ev.published);
  InfoField(out, "kv_events_dropped", ev.dropped);
  InfoField(out, "kv_events_batches", ev.batches);
  InfoField(out, "kv_events_replayed", ev.replayed);
  AppendAttendInfo(s, out);
}

void KeyspaceSection(CommandEnv& s, const InfoFor& who, std::string* out) {
  store::Store* st = s.store();
  if (st == nullptr) return;
  const AclUser* u = who.user;
  if (u != nullptr && u->allkeys) {
    store::KeyspaceStats k = st->KeyStats();
    if (k.keys > 0)
      InfoField(out, "db0",
                "keys=" + std::to_string(k.keys) + ",expires=" + std::to_string(k.expires) +
                    ",avg_ttl=" + std::to_string(k.avg_ttl_ms));
    return;
  }
  // A user with key patterns counts only the keys (string keys and namespaces) it may
  // read, and gets no TTL figures: those would describe other tenants' keys too.
  uint64_t n = AclVisibleKeys(u, store::OpKeys({*st}, "*"), kAclPermRead).size();
  if (n > 0) InfoField(out, "db0", "keys=" + std::to_string(n) + ",expires=0,avg_ttl=0");
}

void ReplicationSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  InfoField(out, "role", std::string("master"));
  InfoField(out, "connected_slaves", uint64_t{0});
  InfoField(out, "master_failover_state", std::string("no-failover"));
  InfoField(out, "master_replid", s.control().replid());
  InfoField(out, "master_replid2", std::string(40, '0'));
  InfoField(out, "master_repl_offset", uint64_t{0});
  InfoField(out, "second_repl_offset", std::string("-1"));
  InfoField(out, "repl_backlog_active", uint64_t{0});
  InfoField(out, "repl_backlog_size", uint64_t{0});
  InfoField(out, "repl_backlog_first_byte_offset", uint64_t{0});
  InfoField(out, "repl_backlog_histlen", uint64_t{0});
}

void CpuSection(CommandEnv&, const InfoFor& /*who*/, std::string* out) {
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  InfoField(out, "used_cpu_sys", Seconds6(self.ru_stime));
  InfoField(out, "used_cpu_user", Seconds6(self.ru_utime));
  InfoField(out, "used_cpu_sys_children", Seconds6(children.ru_stime));
  InfoField(out, "used_cpu_user_children", Seconds6(children.ru_utime));
}

void CommandStatsSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  std::vector<CommandCounters> all = s.control().CommandCountersAll();
  const CommandTable& t = s.commands();
  for (size_t i = 0; i < all.size(); ++i) {
    const CommandCounters& c = all[i];
    if (c.calls == 0 && c.rejected == 0 && c.failed == 0) continue;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,failed_calls=%llu",
                  static_cast<unsigned long long>(c.calls), static_cast<unsigned long long>(c.usec),
                  c.calls > 0 ? static_cast<double>(c.usec) / static_cast<double>(c.calls) : 0.0,
                  static_cast<unsigned long long>(c.rejected),
                  static_cast<unsigned long long>(c.failed));
    InfoField(out, "cmdstat_" + t.stat_name(i), std::string(buf));
  }
}

void ErrorStatsSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  for (const auto& [code, n] : s.control().ErrorCounts())
    InfoField(out, "errorstat_" + code, "count=" + std::to_string(n));
}

// Per-command latency percentiles (latency-tracking), Redis's lines:
// latency_percentiles_usec_<cmd>:p50=1.000,p99=3.000,p99.9=7.000 (microseconds).
void LatencyStatsSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  if (!s.observability().latency_tracking()) return;
  std::vector<TrackHist> all = s.control().TrackedLatencyAll();
  if (all.empty()) return;
  const std::vector<double> percentiles = s.control().ConfigSnapshot().latency_tracking_percentiles;
  const CommandTable& t = s.commands();
  for (size_t i = 0; i < all.size(); ++i) {
    bool any = false;
    for (uint64_t n : all[i]) any |= n != 0;
    if (!any) continue;
    std::string v;
    for (double p : percentiles) {
      if (!v.empty()) v += ',';
      char buf[64];
      std::snprintf(buf, sizeof(buf), "=%.3f", static_cast<double>(TrackPercentileUs(all[i], p)));
      v += 'p' + FormatPercentile(p) + buf;
    }
    InfoField(out, "latency_percentiles_usec_" + t.stat_name(i), v);
  }
}

// cluster_enabled:1 only as the one-node cluster of --cluster-emulated (commands/cluster.cc).
void ClusterSection(CommandEnv& s, const InfoFor& /*who*/, std::string* out) {
  InfoField(out, "cluster_enabled", uint64_t{s.config().cluster_emulated ? 1u : 0u});
}

// INFO's sections in output order: the name a client asks for, the title, whether
// INFO without a section (or `default`) includes it.
struct Section {
  const char* name;
  const char* title;
  bool in_default;
  void (*fill)(CommandEnv& s, const InfoFor& who, std::string* out);
};
constexpr Section kSections[] = {
    {"server", "Server", true, ServerSection},
    {"clients", "Clients", true, ClientsSection},
    {"memory", "Memory", true, MemorySection},
    {"persistence", "Persistence", true, PersistenceSection},
    {"stats", "Stats", true, StatsSection},
    {"replication", "Replication", true, ReplicationSection},
    {"cpu", "CPU", true, CpuSection},
    {"commandstats", "Commandstats", false, CommandStatsSection},
    {"errorstats", "Errorstats", true, ErrorStatsSection},
    {"latencystats", "Latencystats", false, LatencyStatsSection},
    {"pion", "Pion", true, PionSection},
    {"cluster", "Cluster", true, ClusterSection},
    {"keyspace", "Keyspace", true, KeyspaceSection},
};

void Info(CommandContext& ctx) {
  bool want[std::size(kSections)] = {};
  if (ctx.args.size() == 1) {
    for (size_t k = 0; k < std::size(kSections); ++k) want[k] = kSections[k].in_default;
  }
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    if (EqualsIgnoreCase(a, "all") || EqualsIgnoreCase(a, "everything")) {
      for (bool& w : want) w = true;
      continue;
    }
    if (EqualsIgnoreCase(a, "default")) {
      for (size_t k = 0; k < std::size(kSections); ++k) want[k] |= kSections[k].in_default;
      continue;
    }
    for (size_t k = 0; k < std::size(kSections); ++k)
      if (EqualsIgnoreCase(a, kSections[k].name)) want[k] = true;
  }
  CommandEnv& s = *ctx.env;
  std::string out;
  out.reserve(2048);
  for (size_t k = 0; k < std::size(kSections); ++k) {
    if (!want[k]) continue;
    std::string body;
    InfoFor who{ctx.client != nullptr ? ctx.client->worker : 0, s.ClientUser(ctx.client)};
    kSections[k].fill(s, who, &body);
    if (!out.empty()) out.append("\r\n");
    out.append("# ").append(kSections[k].title).append("\r\n").append(body);
  }
  ctx.reply->Verbatim(out);
}

}  // namespace

void AddInfoCommands(std::vector<CommandSpec>* out) {
  out->push_back({"INFO", -1, kCmdLoading | kCmdStale, 0, 0, 0, Info,
                  "Server information and statistics, by section.", "server", "1.0.0",
                  "[section...]"});
  out->back().acl_categories |= kAclDangerous;  // server-wide state (as Redis)
}

}  // namespace pion::server
