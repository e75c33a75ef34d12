#include "server/metrics.h"

#include <unistd.h>

#include <cstdio>

#include "base/clock.h"
#include "base/owned_buffer.h"
#include "persist/persistence.h"
#include "server/kv_events.h"
#include "server/server.h"

namespace pion::server {

namespace {

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Head(const char* name, const char* type, const char* help) {
    out_->append("# HELP ").append(name).append(" ").append(help).append("\n");
    out_->append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void Value(std::string_view name, std::string_view labels, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    Line(name, labels, buf);
  }
  void Value(std::string_view name, std::string_view labels, uint64_t v) {
    Line(name, labels, std::to_string(v));
  }
  void One(const char* name, const char* type, const char* help, uint64_t v) {
    Head(name, type, help);
    Value(name, "", v);
  }
  void OneD(const char* name, const char* type, const char* help, double v) {
    Head(name, type, help);
    Value(name, "", v);
  }
  // A histogram from per-bucket counts with upper bounds 2^i microseconds
  // (the last bucket +Inf), reported in seconds.
  void Histogram(std::string_view name, std::string_view labels, const uint64_t* buckets, size_t n,
                 uint64_t sum_us) {
    uint64_t cum = 0;
    std::string base(name);
    for (size_t i = 0; i < n; ++i) {
      cum += buckets[i];
      char le[48];
      if (i + 1 == n)
        std::snprintf(le, sizeof(le), "+Inf");
      else
        std::snprintf(le, sizeof(le), "%g", static_cast<double>(uint64_t{1} << i) / 1e6);
      std::string l(labels);
      if (!l.empty()) l += ',';
      l += "le=\"";
      l += le;
      l += '"';
      Value(base + "_bucket", l, cum);
    }
    Value(base + "_sum", labels, static_cast<double>(sum_us) / 1e6);
    Value(base + "_count", labels, cum);
  }

 private:
  void Line(std::string_view name, std::string_view labels, std::string_view v) {
    out_->append(name);
    if (!labels.empty()) out_->append("{").append(labels).append("}");
    out_->append(" ").append(v).append("\n");
  }
  std::string* out_;
};

// A label value: backslash, double quote and newline escaped.
std::string Label(std::string_view key, std::string_view v) {
  std::string s(key);
  s += "=\"";
  for (char c : v) {
    if (c == '\\' || c == '"') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  s += '"';
  return s;
}

}  // namespace

std::string MetricsText(Server& s) {
  std::string out;
  out.reserve(16384);
  Writer w(&out);
  ServerStats st = s.Stats();
  w.OneD("pion_uptime_seconds", "gauge", "Seconds since the server started.",
         static_cast<double>(MonotonicUs() - s.start_time_us()) / 1e6);
  w.One("pion_loading", "gauge", "1 while the dataset is being recovered.", s.loading() ? 1 : 0);
  // Connections.
  w.One("pion_connected_clients", "gauge", "Client connections open now.", s.clients().connected());
  w.One("pion_maxclients", "gauge", "The maxclients setting.", s.settings().maxclients());
  w.One("pion_connections_received_total", "counter", "Connections accepted.",
        st.connections_received);
  w.One("pion_rejected_connections_total", "counter", "Connections refused (maxclients).",
        st.rejected_connections);
  w.One("pion_output_limit_disconnections_total", "counter",
        "Clients closed for exceeding client-output-buffer-limit.", st.output_limit_disconnections);
  // Traffic.
  w.One("pion_commands_processed_total", "counter", "Commands executed.", st.commands_processed);
  w.One("pion_instantaneous_ops_per_second", "gauge", "Commands per second (sampled).",
        s.observability().instantaneous_ops());
  w.One("pion_net_input_bytes_total", "counter", "Bytes read from clients.", st.net_input_bytes);
  w.One("pion_net_output_bytes_total", "counter", "Bytes written to clients.", st.net_output_bytes);
  w.One("pion_error_replies_total", "counter", "Error replies sent.", st.error_replies);
  w.One("pion_protocol_errors_total", "counter", "Connections closed on a protocol error.",
        st.protocol_errors);
  // Memory.
  uint64_t used = s.memory().AllocatorMemory();
  w.One("pion_memory_used_bytes", "gauge", "Bytes allocated through the allocator.", used);
  w.One("pion_memory_rss_bytes", "gauge", "Resident set size.", ResidentSetBytes());
  w.One("pion_memory_peak_bytes", "gauge", "Largest pion_memory_used_bytes seen.",
        s.memory().allocator_peak());
  w.One("pion_memory_data_bytes", "gauge", "Bytes charged against maxmemory (INFO used_memory).",
        s.memory().UsedMemory());
  w.One("pion_maxmemory_bytes", "gauge", "The maxmemory budget (0 = none).",
        s.settings().maxmemory());
  w.One("pion_client_memory_bytes", "gauge", "Memory held by client buffers.",
        s.clients().memory());
  // The receipt.
  ReceiptSnapshot r = s.receipt().Read();
  w.One("pion_kvprefix_hits_total", "counter", "KV.PREFIX.LOOKUP hits.", r.hits);
  w.One("pion_kvprefix_misses_total", "counter", "KV.PREFIX.LOOKUP misses.", r.misses);
  w.One("pion_kvprefix_hits_measured_total", "counter",
        "Hits whose prefill time was measured by the client.", r.hits_measured);
  w.One("pion_kvprefix_tokens_served_total", "counter", "Tokens served from cached prefixes.",
        r.tokens_served);
  w.One("pion_kvprefix_bytes_served_total", "counter", "K/V bytes served.", r.bytes_served);
  w.OneD("pion_prefill_seconds_avoided_total", "counter",
         "Prefill time the hits saved (estimated and measured).",
         static_cast<double>(r.prefill_us_saved) / 1e6);
  w.OneD("pion_prefill_seconds_avoided_measured_total", "counter",
         "Prefill time the hits saved, measured hits only.",
         static_cast<double>(r.prefill_us_measured) / 1e6);
  w.One("pion_semantic_hits_total", "counter", "Semantic cache hits.", r.semantic_hits);
  w.One("pion_semantic_misses_total", "counter", "Semantic cache misses.", r.semantic_misses);
  w.One("pion_moe_hits_total", "counter", "MoE expert cache hits.", r.moe_hits);
  w.One("pion_moe_misses_total", "counter", "MoE expert cache misses.", r.moe_misses);
  w.One("pion_vector_queries_total", "counter", "Vector queries.", r.vector_queries);
  // KV events (docs/kv_events.md): zeros while off.
  events::KvEventStats ev = s.kv_events() ? s.kv_events()->Stats() : events::KvEventStats{};
  w.One("pion_kv_events_published_total", "counter", "KV events sent to subscribers.",
        ev.published);
  w.One("pion_kv_events_dropped_total", "counter",
        "KV events dropped (publisher queue full, or a subscriber past its high-water mark).",
        ev.dropped);
  w.One("pion_kv_events_batches_total", "counter", "KV-event batches (sequence numbers taken).",
        ev.batches);
  w.One("pion_kv_events_replayed_total", "counter", "KV-event batches resent on replay.",
        ev.replayed);
  // The disk tier (docs/operations.md "Disk tier").
  if (store::Store* sto = s.store()) {
    store::Store::TierStats t = sto->tier_stats();
    w.One("pion_tier_bytes", "gauge", "Bytes of the disk tier's extents (headers included).",
          t.bytes);
    w.One("pion_tier_maxbytes", "gauge", "The disk tier's bound (tier-maxbytes).", t.max_bytes);
    w.One("pion_tier_entries", "gauge", "Keys whose value lives in the disk tier.", t.entries);
    w.One("pion_tier_reads_total", "counter", "Values read from the disk tier.", t.reads);
    w.One("pion_tier_read_bytes_total", "counter", "Bytes read from the disk tier.", t.read_bytes);
    w.One("pion_tier_writes_total", "counter", "Values written to the disk tier.", t.writes);
    w.One("pion_tier_write_bytes_total", "counter", "Bytes written to the disk tier.",
          t.write_bytes);
    w.One("pion_tier_promotions_total", "counter", "Values moved back from the disk tier to RAM.",
          t.promotions);
    w.One("pion_tier_evictions_total", "counter", "Values the full disk tier dropped.",
          t.evictions);
    w.One("pion_tier_errors_total", "counter", "Failed or damaged disk tier reads and writes.",
          t.errors);
    w.Head("pion_tier_read_seconds", "histogram", "Disk tier read latency.");
    w.Histogram("pion_tier_read_seconds", "", t.read_latency.data(), t.read_latency.size(),
                t.read_us);
  }
  // The store.
  if (store::Store* sto = s.store()) {
    store::StoreStats ss = sto->Stats();
    w.One("pion_vstore_bytes", "gauge", "Bytes of stored K/V rows.", ss.bytes);
    w.One("pion_vstore_max_bytes", "gauge", "The store's byte budget (0 = none).", ss.max_bytes);
    w.One("pion_vstore_sessions", "gauge", "Sessions in the V-store.", ss.sessions);
    w.One("pion_registered_prefixes", "gauge", "Registered namespaces.", ss.registered_prefixes);
    w.One("pion_evictions_total", "counter", "Sessions evicted by LRU (two per namespace).",
          ss.evictions);
    w.One("pion_vstore_fetched_rows_total", "counter", "Rows requested by V.FETCH.",
          ss.total_fetches);
    store::Store::PinStats ps = sto->PinStatsNow();
    w.One("pion_pinned_keys", "gauge", "Keys pinned by KV.BLOCK.MATCH ... PIN.", ps.keys);
    w.One("pion_pinned_bytes", "gauge", "Bytes charged to the pinned keys.", ps.bytes);
    w.One("pion_block_leases", "gauge", "Live KV.BLOCK.MATCH ... PIN leases.", ps.leases);
    // The keyspace (string keys and namespaces together, as INFO keyspace/stats).
    store::KeyspaceStats k = sto->KeyStats();
    w.One("pion_keys", "gauge", "Keys: string keys and namespaces.", k.keys);
    w.One("pion_keys_with_expiry", "gauge", "Keys with a TTL.", k.expires);
    w.One("pion_string_bytes", "gauge", "Bytes string keys are charged to the budget.",
          k.string_bytes);
    w.One("pion_keyspace_hits_total", "counter", "Key reads that found the key.", k.hits);
    w.One("pion_keyspace_misses_total", "counter", "Key reads that found no key.", k.misses);
    w.One("pion_expired_keys_total", "counter", "Keys removed because their TTL passed.",
          k.expired);
    w.One("pion_evicted_keys_total", "counter", "String keys and namespaces evicted.",
          k.evicted_keys);
    w.One("pion_string_values_adopted_total", "counter",
          "Large values kept in the buffer they were received into (no copy).",
          store::StrValue::adopted_total());
  }
  // Large blocks kept for reuse (buffer-recycle-bytes).
  {
    BufferRecycler& rc = BufferRecycler::Global();
    w.One("pion_buffer_recycle_cached_bytes", "gauge", "Bytes of freed blocks kept for reuse.",
          rc.cached_bytes());
    w.One("pion_buffer_recycle_hits_total", "counter",
          "Large allocations answered with a kept block.", rc.hits());
    w.One("pion_buffer_recycle_misses_total", "counter",
          "Large allocations that found no kept block.", rc.misses());
  }
  // The WAL.
  if (persist::Persistence* p = s.persistence(); p != nullptr && !s.loading()) {
    persist::PersistStats ps = p->Stats();
    w.One("pion_wal_enabled", "gauge", "1 while the WAL accepts writes.", ps.wal_enabled ? 1 : 0);
    w.One("pion_wal_bytes", "gauge", "Size of the active WAL file.", ps.wal_bytes);
    w.One("pion_wal_records_total", "counter", "Records appended since the last compaction.",
          ps.wal_appended);
    w.One("pion_wal_durable_lsn", "gauge", "The log position known to be on stable storage.",
          ps.durable_lsn);
    w.One("pion_snapshot_bytes", "gauge", "Size of the last snapshot.", ps.snapshot_bytes);
    w.One("pion_snapshots_total", "counter", "Snapshots written.", ps.saves);
    w.Head("pion_wal_fsync_seconds", "histogram", "WAL fsync latency.");
    w.Histogram("pion_wal_fsync_seconds", "", ps.wal_sync_hist, persist::kSyncHistBuckets,
                ps.wal_sync_us);
  }
  // Commands.
  std::vector<CommandCounters> cmds = s.CommandCountersAll();
  const CommandTable& t = s.commands();
  w.Head("pion_command_calls_total", "counter", "Calls per command.");
  for (size_t i = 0; i < cmds.size(); ++i)
    if (cmds[i].calls > 0)
      w.Value("pion_command_calls_total", Label("cmd", t.stat_name(i)), cmds[i].calls);
  w.Head("pion_command_failed_calls_total", "counter", "Calls that replied with an error.");
  for (size_t i = 0; i < cmds.size(); ++i)
    if (cmds[i].calls > 0)
      w.Value("pion_command_failed_calls_total", Label("cmd", t.stat_name(i)), cmds[i].failed);
  w.Head("pion_command_rejected_calls_total", "counter",
         "Calls refused before they ran (arity, NOAUTH, LOADING).");
  for (size_t i = 0; i < cmds.size(); ++i)
    if (cmds[i].rejected > 0)
      w.Value("pion_command_rejected_calls_total", Label("cmd", t.stat_name(i)), cmds[i].rejected);
  w.Head("pion_command_duration_seconds", "histogram", "Command execution time per command.");
  for (size_t i = 0; i < cmds.size(); ++i)
    if (cmds[i].calls > 0)
      w.Histogram("pion_command_duration_seconds", Label("cmd", t.stat_name(i)),
                  cmds[i].hist.data(), kLatencyBuckets, cmds[i].usec);
  w.Head("pion_errors_total", "counter", "Error replies per error code.");
  for (const auto& [code, n] : s.ErrorCounts())
    w.Value("pion_errors_total", Label("code", code), n);
  return out;
}

MetricsEndpoint::MetricsEndpoint(Server* server) : server_(server), http_(this, {}) {}

MetricsEndpoint::~MetricsEndpoint() { http_.Stop(); }

Status MetricsEndpoint::Start(const std::string& bind, int port) { return http_.Start(bind, port); }

bool MetricsEndpoint::Get(std::string_view path, std::string* content_type, std::string* body) {
  if (path != "/metrics") return false;
  *content_type = "text/plain; version=0.0.4; charset=utf-8";
  *body = MetricsText(*server_);
  return true;
}

uint64_t ResidentSetBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace pion::server
