#include "server/server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/strutil.h"
#include "net/listener.h"
#include "server/commands/errors.h"
#include "server/fd_limit.h"
#include "server/worker.h"

namespace pion::server {

namespace {

constexpr uint64_t kShutdownDrainMs = 5000;
// Buffers cached per worker, in all: the slack the memory target allows.
constexpr size_t kPoolBytesTotal = 64u << 20;
// Background threads: a SAVE (at most one at a time) never delays a COMMIT.
constexpr int kBackgroundThreads = 2;

std::string RandomHex(size_t n) {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ MonotonicNs());
  static const char kHex[] = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = kHex[gen() & 15];
  return s;
}

}  // namespace

namespace {
std::vector<CommandSpec> WithExtra(std::vector<CommandSpec> extra) {
  std::vector<CommandSpec> all = AllCommands();
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}
}  // namespace

Server::Server(Config cfg) : Server(std::move(cfg), {}) {}

Server::Server(Config cfg, std::vector<CommandSpec> extra_commands)
    : cfg_(std::move(cfg)),
      commands_(WithExtra(std::move(extra_commands))),
      background_(kBackgroundThreads, "pion-bg") {
  PublishRuntimeSettings();
  start_time_us_ = MonotonicUs();
  run_id_ = RandomHex(40);
  if (cfg_.kvcache) {
    store_ = std::make_unique<store::Store>(store::StoreConfig{
        cfg_.max_sessions, cfg_.maxmemory, static_cast<uint32_t>(cfg_.max_chain_length)});
    store_->SetRemovalObserver(&attend_observer_);
    store::EvictPolicy p = store::EvictPolicy::kAllKeysLru;
    (void)store::ParseEvictPolicy(cfg_.maxmemory_policy, &p);  // validated by the config
    store_->SetEvictPolicy(p);
  }
  int at = cfg_.attend_threads;
  if (at <= 0) at = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  attend_threads_ = static_cast<uint32_t>(at);
  attend_pool_ = std::make_unique<attend::ComputePool>(attend_threads_, "pion-attend");
  int n = cfg_.workers;
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cfg_.workers = std::min(n, 64);
}

Server::~Server() {
  StopWorkers();
  attend_pool_->Stop();
  background_.Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (fastlane_fd_ >= 0) ::close(fastlane_fd_);
  if (shutdown_fd_ >= 0) ::close(shutdown_fd_);
}

Status Server::Start() {
  PION_CHECK(workers_.empty());
  auto fd = net::Listen(cfg_.bind, cfg_.port);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  port_ = net::BoundPort(listen_fd_);
  PION_RETURN_IF_ERROR(ListenFastLane());
  std::vector<ListenSocket> listeners = {{listen_fd_, net::Protocol::kResp}};
  if (fastlane_fd_ >= 0) listeners.push_back({fastlane_fd_, net::Protocol::kFastLane});
  shutdown_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (shutdown_fd_ < 0) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
  size_t pool = std::max<size_t>(16u << 20, kPoolBytesTotal / static_cast<size_t>(cfg_.workers));
  for (int i = 0; i < cfg_.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(this, i, pool));
    PION_RETURN_IF_ERROR(workers_.back()->Init(listeners));
    durability_.Watch(&workers_.back()->held_replies());
  }
  background_.Start();
  for (auto& w : workers_) w->Start();
  return Status::OK();
}

Status Server::ListenFastLane() {
  // Off without --kvcache (the lane serves the attention commands) or when 0.
  const bool defaulted = cfg_.fastlane_port < 0;
  if (!cfg_.kvcache || cfg_.fastlane_port == 0) {
    if (!cfg_.kvcache && cfg_.fastlane_port > 0)
      LOG_WARNING("fastlane-port %d ignored: the fast lane needs --kvcache", cfg_.fastlane_port);
    cfg_.fastlane_port = 0;
    return Status::OK();
  }
  int want = defaulted ? port_ + 1 : cfg_.fastlane_port;
  if (want > 65535) {
    LOG_WARNING("fast lane off: port + 1 (%d) is not a TCP port; set --fastlane-port", want);
    cfg_.fastlane_port = 0;
    return Status::OK();
  }
  auto fd = net::Listen(cfg_.bind, want);
  if (!fd.ok()) {
    // A port asked for is a start-up error; the default one is only a warning
    // (another server may hold port + 1), and the lane stays off.
    if (!defaulted) return fd.status();
    LOG_WARNING("fast lane off: %s (set --fastlane-port, or 0 to silence this)",
                fd.status().ToString().c_str());
    cfg_.fastlane_port = 0;
    return Status::OK();
  }
  fastlane_fd_ = *fd;
  fastlane_port_ = net::BoundPort(fastlane_fd_);
  cfg_.fastlane_port = fastlane_port_;
  return Status::OK();
}

void Server::RequestShutdown() {
  uint64_t one = 1;
  if (shutdown_fd_ >= 0) {
    ssize_t n = ::write(shutdown_fd_, &one, sizeof(one));
    (void)n;
  }
}

Status Server::SaveForShutdown() {
  if (!hooks_.save) return Status::OK();
  return hooks_.save();
}

int Server::Serve(int signal_fd) {
  pollfd fds[2];
  int nfds = 0;
  fds[nfds++] = pollfd{shutdown_fd_, POLLIN, 0};
  if (signal_fd >= 0) fds[nfds++] = pollfd{signal_fd, POLLIN, 0};
  while (true) {
    int rc = ::poll(fds, nfds, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {
      LOG_WARNING("poll: %s", std::strerror(errno));
      break;
    }
    if (nfds > 1 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo si{};
      ssize_t n = ::read(signal_fd, &si, sizeof(si));
      const char* name = (n == sizeof(si) && si.ssi_signo == SIGINT) ? "SIGINT" : "SIGTERM";
      LOG_NOTICE("Received %s scheduling shutdown...", name);
      break;
    }
    if (fds[0].revents & POLLIN) {
      LOG_NOTICE("User requested shutdown...");
      break;
    }
  }
  StopWorkers();
  LOG_NOTICE("pion is now ready to exit, bye bye...");
  return 0;
}

void Server::StopWorkers() {
  if (workers_.empty() || shutting_down_.exchange(true)) {
    for (auto& w : workers_) w->Join();
    return;
  }
  // 1. Stop accepting and reading everywhere.
  std::mutex mu;
  std::condition_variable cv;
  size_t acked = 0;
  for (auto& w : workers_) {
    w->BeginShutdown([&] {
      std::lock_guard<std::mutex> lk(mu);
      ++acked;
      cv.notify_one();
    });
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return acked == workers_.size(); });
  }
  // 2. Finish background work (a running SAVE completes; its reply is posted
  //    to its worker, sent below). Nothing new is queued: no worker reads.
  //    Queries and WARMs on the compute pool finish the same way.
  attend_pool_->Stop();
  background_.Stop();
  // 3. Make everything acknowledged durable so held replies can go out.
  if (hooks_.flush_on_exit) hooks_.flush_on_exit();
  // 4. Send what is queued, close, stop.
  for (auto& w : workers_) w->FinishShutdown(kShutdownDrainMs);
  for (auto& w : workers_) w->Join();
}

bool Server::KillClient(uint64_t id) {
  int worker = clients_.WorkerOf(id);
  if (worker < 0) return false;
  workers_[worker]->Kill(id);
  return true;
}

ServerStats Server::Stats() const {
  ServerStats s;
  constexpr auto kR = std::memory_order_relaxed;
  for (auto& w : workers_) {
    WorkerStats& ws = w->stats();
    s.connections_received += ws.connections_received.load(kR);
    s.commands_processed += ws.commands.load(kR);
    s.net_input_bytes += ws.net_in.load(kR);
    s.net_output_bytes += ws.net_out.load(kR);
    s.rejected_connections += ws.rejected.load(kR);
    s.output_limit_disconnections += ws.output_limit_disconnects.load(kR);
    s.protocol_errors += ws.protocol_errors.load(kR);
    s.error_replies += ws.error_replies.load(kR);
  }
  return s;
}

void Server::ResetStats() {
  constexpr auto kR = std::memory_order_relaxed;
  for (auto& w : workers_) {
    WorkerStats& ws = w->stats();
    for (auto* c : {&ws.connections_received, &ws.commands, &ws.net_in, &ws.net_out, &ws.rejected,
                    &ws.output_limit_disconnects, &ws.protocol_errors, &ws.error_replies})
      c->store(0, kR);
  }
  if (store_ != nullptr) store_->ResetKeyStats();
}

Config Server::ConfigSnapshot() const {
  std::lock_guard<std::mutex> lk(config_mu_);
  return cfg_;
}

Status Server::SetConfig(const std::vector<std::pair<std::string, std::string>>& pairs,
                         uint64_t* lsn) {
  *lsn = 0;
  std::lock_guard<std::mutex> lk(config_mu_);
  Config next = cfg_;
  ConfigSetError err = ApplyConfigSet(pairs, &next);
  if (!err.ok()) return Status::InvalidArgument(ConfigSetErrorText(err));
  if (next.maxclients != cfg_.maxclients && next.maxclients > MaxClientsForCurrentLimit())
    return Status::InvalidArgument(ConfigSetFdLimitError(MaxClientsForCurrentLimit()));
  // Everything validated: apply.
  if (next.maxmemory != cfg_.maxmemory && store_ != nullptr) {
    Status st = store_->SetMaxBytes(next.maxmemory, lsn);
    if (!st.ok()) return st;
  }
  if (next.maxmemory_policy != cfg_.maxmemory_policy && store_ != nullptr) {
    store::EvictPolicy p = store::EvictPolicy::kAllKeysLru;
    (void)store::ParseEvictPolicy(next.maxmemory_policy, &p);
    store_->SetEvictPolicy(p);
  }
  cfg_.maxmemory_policy = next.maxmemory_policy;
  if (next.appendfsync != cfg_.appendfsync && hooks_.set_appendfsync)
    hooks_.set_appendfsync(next.appendfsync);
  if (next.loglevel != cfg_.loglevel) SetLogLevel(next.loglevel);
  CopyRuntimeSettings(next, &cfg_);
  PublishRuntimeSettings();
  return Status::OK();
}

void Server::PublishRuntimeSettings() {
  constexpr auto kR = std::memory_order_relaxed;
  maxclients_.store(cfg_.maxclients, kR);
  timeout_s_.store(cfg_.timeout, kR);
  output_limit_.store(cfg_.client_output_buffer_limit, kR);
  output_soft_limit_.store(cfg_.client_output_buffer_soft_limit, kR);
  output_soft_seconds_.store(cfg_.client_output_buffer_soft_seconds, kR);
  maxmemory_clients_.store(cfg_.maxmemory_clients, kR);
  maxmemory_.store(cfg_.maxmemory, kR);
  attend_cache_.SetLimits({cfg_.attend_max_slots, cfg_.attend_maxmemory, cfg_.attend_cold_slots});
  if (auto p = attend::ParsePrecision(cfg_.attend_precision))
    attend_precision_.store(static_cast<uint8_t>(*p), kR);
  attend_pool_min_bytes_.store(cfg_.attend_pool_min_bytes, kR);
}

}  // namespace pion::server
