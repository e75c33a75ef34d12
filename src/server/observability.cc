#include "server/observability.h"

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/strutil.h"

namespace pion::server {

namespace {
// MONITOR shows at most this much of one argument (a 16 MiB blob would
// otherwise cost every monitor 64 MiB of escaped text).
constexpr size_t kMonitorArgBytes = 4096;
}  // namespace

void Observability::Apply(const Config& c) {
  constexpr auto kR = std::memory_order_relaxed;
  slowlog_slower_than_.store(c.slowlog_log_slower_than, kR);
  slowlog_max_len_.store(c.slowlog_max_len, kR);
  latency_threshold_ms_.store(c.latency_monitor_threshold, kR);
  latency_tracking_.store(c.latency_tracking, kR);
  slowlog_.Trim(c.slowlog_max_len);
}

void Observability::AddMonitor(ClientInfo* c) {
  if (c->monitor.exchange(true)) return;
  base::MutexLock lk(&monitors_mu_);
  monitor_list_.emplace_back(c->worker, c->id);
  monitors_.fetch_add(1, std::memory_order_relaxed);
}

void Observability::RemoveMonitor(ClientInfo* c) {
  if (!c->monitor.load(std::memory_order_relaxed)) return;
  base::MutexLock lk(&monitors_mu_);
  auto it = std::find(monitor_list_.begin(), monitor_list_.end(), std::make_pair(c->worker, c->id));
  if (it != monitor_list_.end()) {
    monitor_list_.erase(it);
    monitors_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void Observability::FeedMonitors(const ClientInfo& from, std::span<const std::string_view> args) {
  uint64_t us = UnixMicros();
  char head[96];
  std::snprintf(head, sizeof(head), "+%llu.%06llu [0 ",
                static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>(us % 1000000));
  auto line = std::make_shared<std::string>(head);
  line->append(from.addr).append("]");
  bool redact = EqualsIgnoreCase(args[0], "AUTH");
  bool hello = EqualsIgnoreCase(args[0], "HELLO");
  for (size_t i = 0; i < args.size(); ++i) {
    line->push_back(' ');
    if ((redact && i > 0) || (hello && i > 1 && EqualsIgnoreCase(args[i - 1], "AUTH"))) {
      line->append("\"(redacted)\"");
      if (hello && i + 1 < args.size()) {
        line->append(" \"(redacted)\"");
        ++i;
      }
      continue;
    }
    std::string_view a = args[i];
    if (a.size() > kMonitorArgBytes) {
      AppendRepr(line.get(), a.substr(0, kMonitorArgBytes));
      line->append("... (" + std::to_string(a.size() - kMonitorArgBytes) + " more bytes)");
    } else {
      AppendRepr(line.get(), a);
    }
  }
  line->append("\r\n");
  std::vector<std::pair<int, uint64_t>> to;
  {
    base::MutexLock lk(&monitors_mu_);
    to = monitor_list_;
  }
  for (auto& [w, id] : to)
    if (id != from.id) monitor_sink_(w, id, line);
}

void Observability::AfterCommandSlow(std::span<const std::string_view> args,
                                     const CommandSpec& spec, uint64_t usec,
                                     const ClientInfo& client, int64_t slow, uint64_t lat) {
  if (monitors_.load(std::memory_order_relaxed) > 0 && !(spec.flags & kCmdAdmin) &&
      !client.monitor.load(std::memory_order_relaxed))
    FeedMonitors(client, args);
  if (slow >= 0 && usec >= static_cast<uint64_t>(slow)) {
    size_t max = slowlog_max_len_.load(std::memory_order_relaxed);
    if (max > 0) {
      slowlog_.Add(args, usec, client.addr, name_of_(client), max);
    }
  }
  if (lat > 0 && usec >= lat * 1000)
    latency_.Add((spec.flags & kCmdFast) ? "fast-command" : "command", usec / 1000);
}

void Observability::SampleRates(uint64_t now_us, uint64_t ops_total, uint64_t in_bytes,
                                uint64_t out_bytes) {
  RateSample now{now_us, ops_total, in_bytes, out_bytes};
  if (rate_last_.t_us != 0 && now.t_us > rate_last_.t_us) {
    RateSample d{now.t_us - rate_last_.t_us, now.ops - rate_last_.ops, now.in - rate_last_.in,
                 now.out - rate_last_.out};
    if (now.ops < rate_last_.ops || now.in < rate_last_.in || now.out < rate_last_.out)
      d = RateSample{d.t_us, 0, 0, 0};  // CONFIG RESETSTAT in between
    rate_ring_[rate_pos_] = d;
    rate_pos_ = (rate_pos_ + 1) % kRateSamples;
    if (rate_count_ < kRateSamples) ++rate_count_;
    // Redis: the mean of the per-interval rates.
    double ops = 0, in = 0, out = 0;
    for (int i = 0; i < rate_count_; ++i) {
      double secs = static_cast<double>(rate_ring_[i].t_us) / 1e6;
      ops += static_cast<double>(rate_ring_[i].ops) / secs;
      in += static_cast<double>(rate_ring_[i].in) / secs;
      out += static_cast<double>(rate_ring_[i].out) / secs;
    }
    inst_ops_.store(static_cast<uint64_t>(ops / rate_count_), std::memory_order_relaxed);
    inst_in_bps_.store(static_cast<uint64_t>(in / rate_count_), std::memory_order_relaxed);
    inst_out_bps_.store(static_cast<uint64_t>(out / rate_count_), std::memory_order_relaxed);
  }
  rate_last_ = now;
}

}  // namespace pion::server
