// INFO [section ...]: Redis-style "# Section" blocks of "field:value" lines.
// Sections: server, clients, memory, persistence, stats, pion, keyspace;
// "default" and "all" name them all, "everything" too. RESP3 gets a verbatim
// string, RESP2 a bulk string. Counters are server-wide (every worker).
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strutil.h"
#include "net/client_info.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "server/server.h"

#ifndef PION_BUILD_ID
#define PION_BUILD_ID "unknown"
#endif

namespace pion::server {

namespace {

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

uint64_t RssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

void ServerSection(Server& s, int /*worker*/, std::string* out) {
  static const std::string os = [] {
    utsname u{};
    if (::uname(&u) != 0) return std::string("Linux");
    return std::string(u.sysname) + " " + u.release + " " + u.machine;
  }();
  uint64_t up = (MonotonicUs() - s.start_time_us()) / 1000000;
  InfoField(out, "redis_version", std::string("7.0.0"));
  InfoField(out, "pion_version", std::string(PION_VERSION "+" PION_BUILD_ID));
  InfoField(out, "redis_mode", std::string("standalone"));
  InfoField(out, "os", os);
  InfoField(out, "arch_bits", uint64_t{64});
  InfoField(out, "multiplexing_api", std::string("epoll"));
  InfoField(out, "gcc_version",
            std::string(__VERSION__).substr(0, std::string(__VERSION__).find(' ')));
  InfoField(out, "process_id", static_cast<uint64_t>(::getpid()));
  InfoField(out, "run_id", s.run_id());
  InfoField(out, "tcp_port", static_cast<uint64_t>(s.port()));
  InfoField(out, "fastlane_port", static_cast<uint64_t>(s.fastlane_port()));
  InfoField(out, "server_time_usec", UnixMicros());
  InfoField(out, "uptime_in_seconds", up);
  InfoField(out, "uptime_in_days", up / 86400);
  InfoField(out, "workers", static_cast<uint64_t>(s.num_workers()));
  InfoField(out, "kvcache", std::string(s.store() != nullptr ? "yes" : "no"));
  InfoField(out, "config_file", s.config().config_file);
}

void ClientsSection(Server& s, int /*worker*/, std::string* out) {
  InfoField(out, "connected_clients", s.clients().connected());
  InfoField(out, "maxclients", s.maxclients());
  InfoField(out, "blocked_clients", uint64_t{0});
  InfoField(out, "tracking_clients", uint64_t{0});
}

void MemorySection(Server& s, int /*worker*/, std::string* out) {
  uint64_t rss = RssBytes();
  uint64_t max = s.maxmemory();
  InfoField(out, "used_memory", rss);
  InfoField(out, "used_memory_human", Human(rss));
  InfoField(out, "used_memory_rss", rss);
  InfoField(out, "used_memory_rss_human", Human(rss));
  InfoField(out, "maxmemory", max);
  InfoField(out, "maxmemory_human", Human(max));
  InfoField(out, "maxmemory_policy",
            std::string(s.store() != nullptr ? store::EvictPolicyName(s.store()->evict_policy())
                                             : "allkeys-lru"));
  // Client buffers (query, big arguments, unsent replies): maxmemory-clients.
  InfoField(out, "mem_clients_normal", s.clients().memory());
  InfoField(out, "maxmemory_clients", s.maxmemory_clients());
  if (store::Store* st = s.store()) {
    store::StoreStats ss = st->Stats();
    InfoField(out, "vstore_bytes", ss.bytes);
    InfoField(out, "vstore_bytes_human", Human(ss.bytes));
  }
  InfoField(out, "mem_allocator", std::string("libc"));
}

void PersistenceSection(Server& s, int /*worker*/, std::string* out) {
  InfoField(out, "loading", uint64_t{s.loading() ? 1u : 0u});
  InfoField(out, "async_loading", uint64_t{0});
  if (s.hooks().info) s.hooks().info(out);
}

// The keyspace counters of INFO stats (string keys and namespaces together).
void KeyspaceStatsFields(Server& s, std::string* out) {
  store::KeyspaceStats k;
  if (store::Store* st = s.store()) k = st->KeyStats();
  InfoField(out, "expired_keys", k.expired);
  InfoField(out, "evicted_keys", k.evicted_keys);
  InfoField(out, "keyspace_hits", k.hits);
  InfoField(out, "keyspace_misses", k.misses);
}

void StatsSection(Server& s, int /*worker*/, std::string* out) {
  ServerStats st = s.Stats();
  InfoField(out, "total_connections_received", st.connections_received);
  InfoField(out, "total_commands_processed", st.commands_processed);
  InfoField(out, "total_net_input_bytes", st.net_input_bytes);
  InfoField(out, "total_net_output_bytes", st.net_output_bytes);
  InfoField(out, "rejected_connections", st.rejected_connections);
  InfoField(out, "client_output_buffer_limit_disconnections", st.output_limit_disconnections);
  InfoField(out, "total_protocol_errors", st.protocol_errors);
  InfoField(out, "total_error_replies", st.error_replies);
  KeyspaceStatsFields(s, out);
}

void PionSection(Server& s, int worker, std::string* out) {
  ReceiptSnapshot r = s.receipt().Read();
  InfoField(out, "stats_scope", std::string("server"));
  InfoField(out, "worker_id", static_cast<uint64_t>(worker));
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
  }
  AppendAttendInfo(s, out);
}

void KeyspaceSection(Server& s, int /*worker*/, std::string* out) {
  store::Store* st = s.store();
  if (st == nullptr) return;
  store::KeyspaceStats k = st->KeyStats();
  if (k.keys > 0)
    InfoField(out, "db0",
              "keys=" + std::to_string(k.keys) + ",expires=" + std::to_string(k.expires) +
                  ",avg_ttl=" + std::to_string(k.avg_ttl_ms));
}

// INFO's sections in output order: the name a client asks for, the title.
struct Section {
  const char* name;
  const char* title;
  void (*fill)(Server& s, int worker, std::string* out);
};
constexpr Section kSections[] = {
    {"server", "Server", ServerSection},       {"clients", "Clients", ClientsSection},
    {"memory", "Memory", MemorySection},       {"persistence", "Persistence", PersistenceSection},
    {"stats", "Stats", StatsSection},          {"pion", "Pion", PionSection},
    {"keyspace", "Keyspace", KeyspaceSection},
};

void Info(CommandContext& ctx) {
  bool want[std::size(kSections)] = {};
  if (ctx.args.size() == 1) {
    for (bool& w : want) w = true;
  }
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    if (EqualsIgnoreCase(a, "all") || EqualsIgnoreCase(a, "default") ||
        EqualsIgnoreCase(a, "everything")) {
      for (bool& w : want) w = true;
      continue;
    }
    for (size_t k = 0; k < std::size(kSections); ++k)
      if (EqualsIgnoreCase(a, kSections[k].name)) want[k] = true;
  }
  Server& s = *ctx.server;
  std::string out;
  out.reserve(2048);
  for (size_t k = 0; k < std::size(kSections); ++k) {
    if (!want[k]) continue;
    std::string body;
    kSections[k].fill(s, ctx.client != nullptr ? ctx.client->worker : 0, &body);
    if (!out.empty()) out.append("\r\n");
    out.append("# ").append(kSections[k].title).append("\r\n").append(body);
  }
  ctx.reply->Verbatim(out);
}

}  // namespace

void AddInfoCommands(std::vector<CommandSpec>* out) {
  out->push_back({"INFO", -1, kCmdLoading | kCmdStale, 0, 0, 0, Info,
                  "Server information and statistics, by section."});
}

}  // namespace pion::server
