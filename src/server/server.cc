#include "server/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "base/clock.h"
#include "base/cpu.h"
#include "base/log.h"
#include "base/strutil.h"
#include "kvproto/errors.h"
#include "persist/persistence.h"
#include "server/command_service.h"
#include "server/fd_limit.h"
#include "server/persist_glue.h"
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
      acl_(&commands_),
      background_(kBackgroundThreads, "pion-bg"),
      service_(std::make_unique<CommandService>(this)),
      attention_(cfg_.attend_threads),
      observability_(
          [this](int w, uint64_t id, const std::shared_ptr<const std::string>& line) {
            if (w >= 0 && static_cast<size_t>(w) < workers_.size())
              workers_[w]->PushMonitor(id, line);
          },
          [this](const ClientInfo& c) { return clients_.Name(&c); }) {
  // requirepass is the default user's password from the start (Start() loads
  // the user lines / aclfile and applies it again over them).
  if (!cfg_.requirepass.empty()) acl_.SetDefaultPassword(cfg_.requirepass);
  acl_.set_log_max_len(cfg_.acllog_max_len);
  PublishRuntimeSettings();
  start_time_us_ = MonotonicUs();
  run_id_ = RandomHex(40);
  replid_ = RandomHex(40);
  spare_stats_ = std::make_unique<CommandStats>(commands_.num_stat_names());
  if (cfg_.kvcache) {
    store_ = std::make_unique<store::Store>(store::StoreConfig{
        cfg_.max_sessions, cfg_.maxmemory, static_cast<uint32_t>(cfg_.max_chain_length)});
    store_->SetRemovalObserver(&store_removals_);
    store::EvictPolicy p = store::EvictPolicy::kAllKeysLru;
    (void)store::ParseEvictPolicy(cfg_.maxmemory_policy, &p);  // validated by the config
    store_->SetEvictPolicy(p);
    store_->SetEvictionSamples(static_cast<uint32_t>(cfg_.maxmemory_samples));
    store_->SetLfuParams(static_cast<uint32_t>(cfg_.lfu_log_factor),
                         static_cast<uint32_t>(cfg_.lfu_decay_time));
    store_->SetMaxBlockLeases(cfg_.max_block_leases);
  }
  memory_.set_store(store_.get());
  int n = cfg_.workers;
  if (n <= 0) n = static_cast<int>(CoreCount());
  cfg_.workers = std::min(n, 64);
  env_.control_ = this;
  env_.config_ = &cfg_;
  env_.settings_ = &settings_;
  env_.store_ = store_.get();
  env_.commands_ = &commands_;
  env_.acl_ = &acl_;
  env_.clients_ = &clients_;
  env_.pubsub_ = &pubsub_;
  env_.tracking_ = &tracking_;
  env_.observability_ = &observability_;
  env_.durability_ = &durability_;
  env_.background_ = &background_;
  env_.exec_mu_ = &exec_mu_;
  env_.attention_ = &attention_;
  env_.memory_ = &memory_;
  env_.saves_ = &saves_;
  env_.client_pause_ = &client_pause_;
  env_.client_eviction_ = &eviction_;
}

Server::~Server() {
  StopWorkers();
  attention_.Stop();
  background_.Stop();
  if (shutdown_fd_ >= 0) ::close(shutdown_fd_);
}

Status Server::AttachTier() {
  if (store_ == nullptr || cfg_.tier_dir.empty()) return Status::OK();
  if (cfg_.tier_maxbytes == 0 || cfg_.tier_maxbytes > tier::kMaxTierBytes)
    return Status::InvalidArgument("tier-dir needs tier-maxbytes (1 byte to 16tb)");
  if (cfg_.maxmemory == 0)
    LOG_WARNING("tier-dir is set but maxmemory is 0: nothing will move to the disk tier");
  PION_RETURN_IF_ERROR(store_->AttachTier(cfg_.tier_dir, cfg_.tier_maxbytes, cfg_.tier_min_value,
                                          cfg_.tier_write_queue,
                                          static_cast<uint32_t>(cfg_.tier_io_threads),
                                          /*adopt=*/true));
  const store::Store::TierStats ts = store_->tier_stats();
  LOG_NOTICE("disk tier: %s/%s, up to %llu bytes, values of %llu bytes or more%s",
             cfg_.tier_dir.c_str(), tier::kFileName,
             static_cast<unsigned long long>(cfg_.tier_maxbytes),
             static_cast<unsigned long long>(cfg_.tier_min_value),
             ts.direct_io ? "" : " (no direct I/O on this file system: page cache)");
  return Status::OK();
}

Status Server::Start() {
  PION_CHECK(workers_.empty());
  PION_RETURN_IF_ERROR(InitAcl());
  PION_RETURN_IF_ERROR(AttachTier());
  PION_RETURN_IF_ERROR(listeners_.Open(&cfg_));
  std::vector<ListenSocket> listeners = listeners_.sockets(cfg_.tls_fastlane);
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

void Server::RequestShutdown() {
  uint64_t one = 1;
  if (shutdown_fd_ >= 0) {
    ssize_t n = ::write(shutdown_fd_, &one, sizeof(one));
    (void)n;
  }
}

net::Service* Server::service() { return service_.get(); }

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
  attention_.Stop();
  background_.Stop();
  // 3. Make everything acknowledged durable so held replies can go out.
  if (env_.persistence_ != nullptr) {
    Status s = env_.persistence_->Close();  // flush + fsync, then NotifyDurable
    if (!s.ok()) LOG_WARNING("flushing the WAL at exit failed: %s", s.ToString().c_str());
  }
  // 4. Send what is queued, close, stop.
  for (auto& w : workers_) w->FinishShutdown(kShutdownDrainMs);
  for (auto& w : workers_) w->Join();
}

void Server::Push(int w, uint64_t id, const std::shared_ptr<const std::string>& msg) {
  // In-process tests run without workers: nothing to deliver to.
  if (w >= 0 && static_cast<size_t>(w) < workers_.size()) workers_[w]->DeliverPush(id, msg);
}

void Server::DeliverQueuedPushes(int w) {
  if (w >= 0 && static_cast<size_t>(w) < workers_.size()) workers_[w]->BeforeInput();
}

void Server::PubSubRemoveClient(ClientInfo* c) {
  if (!c->pubsub.load(std::memory_order_relaxed)) return;
  pubsub_.RemoveClient(c->id);
  c->pubsub.store(false, std::memory_order_relaxed);
  c->sub.store(0, std::memory_order_relaxed);
  c->psub.store(0, std::memory_order_relaxed);
  c->ssub.store(0, std::memory_order_relaxed);
}

void Server::StoreRemovals::OnNamespaceGone(std::string_view ns, bool evicted) {
  server_->tracking_.InvalidateKey(ns, 0);
  if (evicted)
    server_->NotifyKeyspaceEvent(kNotifyEvicted, "evicted", ns);
  else
    server_->NotifyKeyspaceEvent(kNotifyModule, "kvprefix.drop", ns);
}

void Server::StoreRemovals::OnStringRemoved(std::string_view key, bool evicted) {
  server_->tracking_.InvalidateKey(key, 0);  // expired or evicted: a modification
  if (evicted)
    server_->NotifyKeyspaceEvent(kNotifyEvicted, "evicted", key);
  else
    server_->NotifyKeyspaceEvent(kNotifyExpired, "expired", key);
}

CommandStats& Server::cmdstats_of(int w) {
  if (w >= 0 && static_cast<size_t>(w) < workers_.size()) return workers_[w]->cmdstats();
  return *spare_stats_;
}

std::vector<CommandCounters> Server::CommandCountersAll() const {
  std::vector<CommandCounters> out(commands_.num_stat_names());
  for (auto& w : workers_) w->cmdstats().AddTo(&out);
  spare_stats_->AddTo(&out);
  return out;
}

std::vector<TrackHist> Server::TrackedLatencyAll() const {
  std::vector<TrackHist> out(commands_.num_stat_names());
  bool any = false;
  for (auto& w : workers_) any |= w->cmdstats().AddTrackedTo(&out);
  any |= spare_stats_->AddTrackedTo(&out);
  if (!any) out.clear();
  return out;
}

std::map<std::string, uint64_t> Server::ErrorCounts() const {
  std::map<std::string, uint64_t> out;
  for (auto& w : workers_) w->cmdstats().AddErrorsTo(&out);
  spare_stats_->AddErrorsTo(&out);
  return out;
}

void Server::SampleRates() {
  ServerStats st = Stats();
  observability_.SampleRates(MonotonicUs(), st.commands_processed, st.net_input_bytes,
                             st.net_output_bytes);
  // Keeps used_memory_peak current (the allocator's peak is raised by each
  // mallinfo2 figure, taken only when asked for: see AllocatorMemory).
  if (++rate_ticks_ % 10 == 0) memory_.UsedMemory();
  eviction_.Evict();  // maxmemory-clients lowered, or a client's NO-EVICT turned off
}

Status Server::InitAcl() {
  if (!cfg_.aclfile.empty() && !cfg_.users.empty())
    return Status::InvalidArgument(
        "users are defined in the config file ('user' lines) and an aclfile is set: use one");
  if (!cfg_.aclfile.empty()) {
    auto lines = ReadAclFile(cfg_.aclfile);
    if (!lines.ok()) return lines.status();
    PION_RETURN_IF_ERROR(acl_.LoadLines(*lines, cfg_.aclfile));
  } else if (!cfg_.users.empty()) {
    PION_RETURN_IF_ERROR(
        acl_.LoadLines(cfg_.users, cfg_.config_file.empty() ? "config" : cfg_.config_file));
  }
  if (!cfg_.requirepass.empty()) acl_.SetDefaultPassword(cfg_.requirepass);
  acl_.set_log_max_len(cfg_.acllog_max_len);
  return Status::OK();
}

bool Server::default_user_open() const {
  auto u = acl_.Default();
  return u != nullptr && u->enabled && u->nopass;
}

const AclUser* Server::RefreshClientUser(ClientInfo* c) {
  c->principal_epoch = acl_.epoch();
  c->principal = acl_.Find(clients_.User(c));  // nullptr once the user was deleted
  return static_cast<const AclUser*>(c->principal.get());
}

void Server::SetClientUser(ClientInfo* c, std::shared_ptr<const AclUser> u) {
  clients_.SetUser(c, u->name);
  c->principal_epoch = acl_.epoch();
  c->principal = std::move(u);
}

std::string Server::ClientUserName(const ClientInfo* c) { return clients_.User(c); }

std::string Server::ClientLine(const ClientInfo* c) {
  std::string s;
  clients_.With(c, [&](const ClientInfo& ci) { AppendClientLine(ci, &s); });
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void Server::KillClientsOfUsers(const std::vector<std::string>& names) {
  std::vector<uint64_t> ids;
  clients_.ForEach([&](const ClientInfo& c) {
    for (const std::string& n : names)
      if (c.user == n) ids.push_back(c.id);
  });
  for (uint64_t id : ids) KillClient(id);
}

void Server::KillPubSubClientsOfUsers() {
  if (!pubsub_.any() || workers_.empty()) return;
  std::unordered_map<uint64_t, std::string> users;
  clients_.ForEach([&](const ClientInfo& c) {
    if (c.pubsub.load(std::memory_order_relaxed)) users.emplace(c.id, c.user);
  });
  for (const PubSub::ClientView& v : pubsub_.Clients()) {
    auto it = users.find(v.id);
    if (it == users.end()) continue;
    std::shared_ptr<const AclUser> u = acl_.Find(it->second);
    if (u == nullptr || AclSubscriptionsAllowed(*u, v.channels, v.patterns, v.shards)) continue;
    workers_[v.worker]->Kill(v.id);  // as Redis: the client goes, not only the subscription
  }
}

bool Server::KillClient(uint64_t id) {
  int worker = clients_.MarkClosing(id);
  if (worker < 0) return false;
  workers_[worker]->Kill(id);
  return true;
}

bool Server::ClosePickedClient(uint64_t id) {
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
    s.tls_handshake_failures += ws.tls_handshake_failures.load(kR);
    s.error_replies += ws.error_replies.load(kR);
  }
  return s;
}

void Server::ResetStats() {
  constexpr auto kR = std::memory_order_relaxed;
  spare_stats_->Reset();
  for (auto& w : workers_) {
    w->cmdstats().Reset();
    WorkerStats& ws = w->stats();
    for (auto* c : {&ws.connections_received, &ws.commands, &ws.net_in, &ws.net_out, &ws.rejected,
                    &ws.output_limit_disconnects, &ws.protocol_errors, &ws.error_replies,
                    &ws.tls_handshake_failures})
      c->store(0, kR);
  }
  eviction_.ResetStats();
  if (store_ != nullptr) store_->ResetKeyStats();
}

Config Server::ConfigSnapshot() const {
  base::MutexLock lk(&config_mu_);
  return cfg_;
}

Status Server::SetConfig(const std::vector<std::pair<std::string, std::string>>& pairs,
                         uint64_t* lsn) {
  *lsn = 0;
  base::MutexLock lk(&config_mu_);
  Config next = cfg_;
  ConfigSetError err = ApplyConfigSet(pairs, &next);
  if (!err.ok()) return Status::InvalidArgument(ConfigSetErrorText(err));
  if (next.maxclients != cfg_.maxclients && next.maxclients > MaxClientsForCurrentLimit())
    return Status::InvalidArgument(ConfigSetFdLimitError(MaxClientsForCurrentLimit()));
  // TLS settings: build the new context before anything changes (a bad
  // certificate refuses the whole CONFIG SET).
  std::shared_ptr<const net::TlsContext> new_tls;
  bool tls_changed =
      next.tls_cert_file != cfg_.tls_cert_file || next.tls_key_file != cfg_.tls_key_file ||
      next.tls_ca_cert_file != cfg_.tls_ca_cert_file ||
      next.tls_auth_clients != cfg_.tls_auth_clients || next.tls_protocols != cfg_.tls_protocols ||
      next.tls_ciphers != cfg_.tls_ciphers || next.tls_ciphersuites != cfg_.tls_ciphersuites;
  // Setting the same file again reloads it (a renewed certificate).
  for (const auto& [name, value] : pairs)
    if (ToLower(name).starts_with("tls-")) tls_changed = true;
  if (tls_changed && listeners_.serves_tls(cfg_.tls_fastlane)) {
    auto ctx = net::TlsContext::Create(TlsConfigOf(next));
    if (!ctx.ok()) return Status::InvalidArgument(ConfigSetTlsError(ctx.status().message()));
    new_tls = *ctx;
  }
  if (next.tier_maxbytes != cfg_.tier_maxbytes && !cfg_.tier_dir.empty() &&
      (next.tier_maxbytes == 0 || next.tier_maxbytes > tier::kMaxTierBytes))
    return Status::InvalidArgument(ConfigSetTierMaxbytesError());
  // A new port is bound before anything changes: a port in use refuses the
  // whole CONFIG SET (listeners.cc).
  int new_port_fd = -1;
  if (next.port != cfg_.port) {
    auto fd = listeners_.OpenNewPort(cfg_.bind, next.port);
    if (!fd.ok()) return fd.status();
    new_port_fd = *fd;
  }
  // Everything validated: apply.
  if (next.tier_maxbytes != cfg_.tier_maxbytes && store_ != nullptr)
    store_->SetTierMaxBytes(next.tier_maxbytes);
  if (next.tier_min_value != cfg_.tier_min_value && store_ != nullptr)
    store_->SetTierMinValue(next.tier_min_value);
  if (next.maxmemory != cfg_.maxmemory && store_ != nullptr) {
    Status st = store_->SetMaxBytes(next.maxmemory, lsn);
    if (!st.ok()) {
      if (new_port_fd >= 0) ::close(new_port_fd);
      return st;
    }
  }
  if (next.maxmemory_policy != cfg_.maxmemory_policy && store_ != nullptr) {
    store::EvictPolicy p = store::EvictPolicy::kAllKeysLru;
    (void)store::ParseEvictPolicy(next.maxmemory_policy, &p);
    store_->SetEvictPolicy(p);
  }
  cfg_.maxmemory_policy = next.maxmemory_policy;
  if (next.maxmemory_samples != cfg_.maxmemory_samples && store_ != nullptr)
    store_->SetEvictionSamples(static_cast<uint32_t>(next.maxmemory_samples));
  if ((next.lfu_log_factor != cfg_.lfu_log_factor || next.lfu_decay_time != cfg_.lfu_decay_time) &&
      store_ != nullptr)
    store_->SetLfuParams(static_cast<uint32_t>(next.lfu_log_factor),
                         static_cast<uint32_t>(next.lfu_decay_time));
  if (next.max_block_leases != cfg_.max_block_leases && store_ != nullptr)
    store_->SetMaxBlockLeases(next.max_block_leases);
  if (next.appendfsync != cfg_.appendfsync && env_.persistence_ != nullptr)
    env_.persistence_->SetPolicy(ToSyncPolicy(next.appendfsync));
  if (next.loglevel != cfg_.loglevel) SetLogLevel(next.loglevel);
  if (next.acllog_max_len != cfg_.acllog_max_len) acl_.set_log_max_len(next.acllog_max_len);
  // As Redis: CONFIG SET requirepass resets the default user's passwords to
  // this one (empty: nopass); connections already authenticated stay so.
  for (const auto& [name, value] : pairs)
    if (EqualsIgnoreCase(name, "requirepass")) acl_.SetDefaultPassword(next.requirepass);
  if (new_port_fd >= 0) next.port = listeners_.SwitchPort(new_port_fd, cfg_.bind, workers_);
  CopyRuntimeSettings(next, &cfg_);
  PublishRuntimeSettings();
  if (new_tls != nullptr) listeners_.set_tls_context(std::move(new_tls));
  return Status::OK();
}

void Server::PublishRuntimeSettings() {
  constexpr auto kR = std::memory_order_relaxed;
  settings_.Publish(cfg_);
  saves_.SetSavePoints(cfg_.save_points);
  env_.notify_flags_.store(cfg_.notify_keyspace_events, kR);
  acl_.set_pubsub_default_all(cfg_.acl_pubsub_allchannels);
  eviction_.Evict();  // a lowered maxmemory-clients takes effect before the reply, as Redis
  BufferRecycler::Global().set_max_bytes(cfg_.buffer_recycle_bytes);
  attention_.Apply(cfg_);
  observability_.Apply(cfg_);
  tracking_.SetMaxKeys(cfg_.tracking_table_max_keys);
}

}  // namespace pion::server
