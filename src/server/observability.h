// Observability: what the server records about the commands it runs, for
// operators (docs/operations.md): the slow log, the latency monitor, the
// MONITOR clients and the instantaneous rates (ops/s, input and output
// kbps). The server owns one (Server::observability()); a worker calls
// AfterCommand() after each handler, worker 0 calls SampleRates() every
// 100 ms, and the settings come from the config (Apply).
//
// Per-command counters are not here: each worker owns its CommandStats
// (server/command_stats.h) and the server sums them on read.
//
// Thread-safety: every method may be called from any thread. The hot path
// (AfterCommand with nothing enabled) is three relaxed loads; SlowLog and
// LatencyMonitor have their own mutexes, the monitor list monitors_mu_.
// SampleRates() is worker 0's alone (its ring is not guarded).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "net/client_info.h"
#include "server/commands/command.h"
#include "server/config.h"
#include "server/latency_monitor.h"
#include "server/slowlog.h"

namespace pion::server {

class Observability {
 public:
  // Hands a formatted MONITOR line to client `id` of worker `w`.
  using MonitorSink =
      std::function<void(int w, uint64_t id, const std::shared_ptr<const std::string>& line)>;
  // The name a client goes by in the slow log (CLIENT SETNAME).
  using NameOf = std::function<std::string(const ClientInfo&)>;

  Observability(MonitorSink monitor_sink, NameOf name_of)
      : monitor_sink_(std::move(monitor_sink)), name_of_(std::move(name_of)) {}
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  // The thresholds and lengths of `c` (start-up and every CONFIG SET).
  void Apply(const Config& c);

  // After a command's handler returned (worker thread): the slow log, the
  // latency monitor and MONITOR clients, each only when enabled (three
  // relaxed loads otherwise).
  void AfterCommand(std::span<const std::string_view> args, const CommandSpec& spec, uint64_t usec,
                    const ClientInfo& client) {
    int64_t slow = slowlog_slower_than_.load(std::memory_order_relaxed);
    uint64_t lat = latency_threshold_ms_.load(std::memory_order_relaxed);
    if ((slow >= 0 && usec >= static_cast<uint64_t>(slow)) || (lat > 0 && usec >= lat * 1000) ||
        monitors_.load(std::memory_order_relaxed) > 0)
      AfterCommandSlow(args, spec, usec, client, slow, lat);
  }
  // MONITOR clients only (a command refused before it ran that Redis still
  // shows: EXEC aborted under memory pressure).
  void MonitorCommand(std::span<const std::string_view> args, const CommandSpec& spec,
                      const ClientInfo& client) {
    if (monitors_.load(std::memory_order_relaxed) > 0)
      AfterCommandSlow(args, spec, 0, client, -1, 0);
  }

  SlowLog& slowlog() { return slowlog_; }
  LatencyMonitor& latency() { return latency_; }
  // latency-tracking (CONFIG SET): whether the workers fill the per-command
  // latency histograms.
  bool latency_tracking() const { return latency_tracking_.load(std::memory_order_relaxed); }

  // MONITOR: `c` (on its own worker thread) receives every later command.
  void AddMonitor(ClientInfo* c) EXCLUDES(monitors_mu_);
  // A closing client (or RESET) stops monitoring.
  void RemoveMonitor(ClientInfo* c) EXCLUDES(monitors_mu_);

  // Redis' instantaneous_* fields: the mean of the last 16 per-interval rates
  // of these running totals (commands, input bytes, output bytes). A total
  // that went down (CONFIG RESETSTAT) counts as an interval of nothing.
  void SampleRates(uint64_t now_us, uint64_t ops, uint64_t in_bytes, uint64_t out_bytes);
  uint64_t instantaneous_ops() const { return inst_ops_.load(std::memory_order_relaxed); }
  double instantaneous_input_kbps() const {
    return static_cast<double>(inst_in_bps_.load(std::memory_order_relaxed)) / 1024.0;
  }
  double instantaneous_output_kbps() const {
    return static_cast<double>(inst_out_bps_.load(std::memory_order_relaxed)) / 1024.0;
  }

 private:
  void AfterCommandSlow(std::span<const std::string_view> args, const CommandSpec& spec,
                        uint64_t usec, const ClientInfo& client, int64_t slow, uint64_t lat);
  void FeedMonitors(const ClientInfo& from, std::span<const std::string_view> args)
      EXCLUDES(monitors_mu_);

  const MonitorSink monitor_sink_;
  const NameOf name_of_;

  std::atomic<int64_t> slowlog_slower_than_{0};
  std::atomic<uint64_t> slowlog_max_len_{0};
  std::atomic<uint64_t> latency_threshold_ms_{0};
  std::atomic<bool> latency_tracking_{true};
  SlowLog slowlog_;
  LatencyMonitor latency_;

  std::atomic<int> monitors_{0};
  base::Mutex monitors_mu_;
  std::vector<std::pair<int, uint64_t>> monitor_list_ GUARDED_BY(monitors_mu_);  // (worker, id)

  // The rate sampler's ring (SampleRates' caller only) and its results.
  static constexpr int kRateSamples = 16;
  struct RateSample {
    uint64_t t_us = 0, ops = 0, in = 0, out = 0;
  };
  RateSample rate_last_{};
  RateSample rate_ring_[kRateSamples]{};  // per-interval deltas
  int rate_pos_ = 0, rate_count_ = 0;
  std::atomic<uint64_t> inst_ops_{0}, inst_in_bps_{0}, inst_out_bps_{0};
};

}  // namespace pion::server
