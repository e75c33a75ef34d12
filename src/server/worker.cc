#include "server/worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <shared_mutex>

#include "base/clock.h"
#include "base/log.h"
#include "base/sharded_counter.h"
#include "kvproto/errors.h"
#include "net/connection.h"
#include "net/tls.h"
#include "server/kv_events.h"
#include "server/protected_mode.h"
#include "server/server.h"
#include "tier/tier_ring.h"

namespace pion::server {

namespace {

// The worker whose loop runs on this thread.
thread_local Worker* t_worker = nullptr;

constexpr int kAcceptBatch = 16;
constexpr uint64_t kAcceptPauseMs = 100;

// A refusal sent before closing an accepted socket: a RESP error line, or an
// ERROR frame on the fast lane.
void RefuseAndClose(int fd, net::Protocol protocol, std::string_view resp_line) {
  std::string msg;
  if (protocol == net::Protocol::kResp) {
    msg = resp_line;
  } else {
    std::string_view text = resp_line.substr(1);  // without '-' ...
    if (text.size() >= 2 && text.substr(text.size() - 2) == "\r\n")
      text.remove_suffix(2);  // ... and CRLF
    msg.resize(net::kFrameHeaderBytes);
    net::EncodeFrameHeader(msg.data(), net::FrameStatus::kError,
                           static_cast<uint32_t>(text.size()));
    msg.append(text);
  }
  ssize_t n = ::write(fd, msg.data(), msg.size());
  (void)n;
  ::close(fd);
}

std::string SockAddrText(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  std::string s = host;
  s += ':';
  s += std::to_string(port);
  return s;
}

std::string PeerText(int fd, bool local) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int rc = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                 : ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return "?:0";
  return SockAddrText(ss);
}

}  // namespace

Worker::Worker(Server* server, int index, size_t pool_bytes)
    : server_(server),
      index_(index),
      pool_(pool_bytes),
      cmdstats_(server->commands().num_stat_names()),
      held_(&server->durability(), &loop_) {}

namespace {
// Active expiry: worker 0 removes up to this many expired string keys this often.
constexpr uint64_t kActiveExpireMs = 100;
constexpr uint64_t kActiveExpireKeys = 1000;
}  // namespace

Worker::~Worker() {
  for (auto& [id, c] : conns_)
    if (!c->closed()) c->Close("server exit");
  conns_.clear();
}

Status Worker::Init(const std::vector<ListenSocket>& listeners) {
  PION_RETURN_IF_ERROR(loop_.Init());
  listeners_ = listeners;
  PION_RETURN_IF_ERROR(WatchListeners());
  loop_.AddTimer(1000, true, [this] { Cron(); });
  // KV events made on this worker go out in batches up to kv-events-batch-us old.
  loop_.SetTurnHook([] { return KvEvents::OnLoopTurn(); });
  if (index_ == 0) {
    // Active expiry of string keys (lazy expiry covers keys that are read).
    loop_.AddTimer(kActiveExpireMs, true, [this] {
      store::Store* st = server_->store();
      if (st == nullptr || server_->loading()) return;
      std::shared_lock<WriterFirstMutex> l(server_->exec_mu());  // not inside an EXEC
      (void)st->ExpireActive(kActiveExpireKeys);  // BlockRemoved: batched by OnLoopTurn
    });
    // instantaneous_ops_per_sec & co. are sampled by one worker, which also
    // starts the snapshot a save point (config `save`) calls for.
    loop_.AddTimer(100, true, [this] {
      server_->SampleRates();
      server_->SavePointsCron();
    });
  }
  return Status::OK();
}

Status Worker::WatchListeners() {
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].fd < 0) continue;
    PION_RETURN_IF_ERROR(loop_.Add(listeners_[i].fd, EPOLLIN | EPOLLEXCLUSIVE,
                                   [this, i](uint32_t) { OnAccept(listeners_[i]); }));
  }
  return Status::OK();
}

void Worker::PushMonitor(uint64_t client_id, std::shared_ptr<const std::string> line) {
  loop_.Post([this, client_id, line = std::move(line)] {
    auto it = conns_.find(client_id);
    if (it != conns_.end() && !it->second->closed()) it->second->PushRaw(*line);
  });
}

void Worker::DeliverPush(uint64_t client_id, std::shared_ptr<const std::string> msg) {
  bool post = false;
  {
    std::lock_guard<std::mutex> l(inbox_mu_);
    inbox_.push_back({client_id, std::move(msg)});
    inbox_ready_.store(true, std::memory_order_release);
    if (!inbox_posted_) post = inbox_posted_ = true;
  }
  if (!post) return;
  // From this worker's own thread (a notification or PUBLISH for one of its
  // own subscribers), the drain runs after this turn's events with no wakeup:
  // the eventfd's write and read cost as much as the command itself.
  if (t_worker == this)
    loop_.Defer([this] { DrainInbox(true); });
  else
    loop_.Post([this] { DrainInbox(true); });
}

void Worker::DrainInbox(bool posted) {
  {
    std::lock_guard<std::mutex> l(inbox_mu_);
    inbox_batch_.swap(inbox_);
    if (posted) inbox_posted_ = false;
    inbox_ready_.store(false, std::memory_order_relaxed);
  }
  for (Push& p : inbox_batch_) {
    auto it = conns_.find(p.client_id);
    if (it == conns_.end() || it->second->closed()) continue;
    if (it->second->QueuePush(*p.msg) && (pushed_to_.empty() || pushed_to_.back() != p.client_id))
      pushed_to_.push_back(p.client_id);
  }
  inbox_batch_.clear();
  if (!pushed_to_.empty() && !flush_deferred_) {
    flush_deferred_ = true;
    loop_.Defer([this] { FlushPushed(); });
  }
}

void Worker::FlushPushed() {
  flush_deferred_ = false;
  std::vector<uint64_t> ids;
  ids.swap(pushed_to_);
  for (uint64_t id : ids) {
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->closed()) it->second->FlushPushes();
  }
  ids.clear();
  if (pushed_to_.empty()) pushed_to_.swap(ids);  // keep the capacity
}

void Worker::Start() {
  thread_ = std::thread([this] {
    char name[16];
    std::snprintf(name, sizeof(name), "pion-w%d", index_);
    pthread_setname_np(pthread_self(), name);
    SetThreadSlot(index_);       // its own cells of the server-wide counters
    KvEvents::LoopOwnsThread();  // KV events wait for OnLoopTurn (set in Init)
    t_worker = this;
    StartTierRing();
    loop_.Run();
    if (tier_ring_ != nullptr) {
      // Reads still in flight finish here (their replies go nowhere now).
      tier_ring_->Drain();
      tier::ReadRing::SetCurrent(nullptr);
    }
    // Whatever is left (deadline passed) is closed on the worker's own thread.
    for (auto& [id, c] : conns_)
      if (!c->closed()) c->Close("server exit");
    conns_.clear();
    KvEvents::FlushThread();  // held KV events, before the publisher stops
  });
}

void Worker::StartTierRing() {
  const Config& c = server_->config();
  if (c.tier_dir.empty() || c.tier_ring_depth == 0 || server_->store() == nullptr) return;
  auto r = tier::ReadRing::Create(static_cast<unsigned>(c.tier_ring_depth));
  if (!r.ok()) {
    if (index_ == 0)
      LOG_WARNING("disk tier: reads go to the tier I/O threads (no io_uring here: %s)",
                  r.status().ToString().c_str());
    return;
  }
  tier::ReadRing* ring = r->get();
  Status st = loop_.Add(ring->event_fd(), EPOLLIN, [ring](uint32_t) { ring->Reap(); });
  if (!st.ok()) {
    LOG_WARNING("disk tier: worker %d reads on the tier I/O threads (%s)", index_,
                st.ToString().c_str());
    return;
  }
  tier_ring_ = std::move(*r);
  tier::ReadRing::SetCurrent(ring);
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::ReplaceListener(int old_fd, int new_fd, std::function<void()> done) {
  loop_.Post([this, old_fd, new_fd, done] {
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (listeners_[i].fd != old_fd) continue;
      // While accepts are paused (or stopped for shutdown) no listener is
      // watched: the resume watches the new one.
      bool watched = !accept_paused_ && !shutting_down_;
      if (watched) loop_.Remove(old_fd);
      listeners_[i].fd = new_fd;
      if (watched) {
        Status st = loop_.Add(new_fd, EPOLLIN | EPOLLEXCLUSIVE,
                              [this, i](uint32_t) { OnAccept(listeners_[i]); });
        if (!st.ok()) LOG_WARNING("listener: %s", st.ToString().c_str());
      }
    }
    done();
  });
}

void Worker::PauseAccepting() {
  if (accept_paused_ || listeners_.empty()) return;
  accept_paused_ = true;
  for (const ListenSocket& l : listeners_)
    if (l.fd >= 0) loop_.Remove(l.fd);
  loop_.AddTimer(kAcceptPauseMs, false, [this] {
    accept_paused_ = false;
    if (shutting_down_) return;
    Status st = WatchListeners();
    if (!st.ok()) LOG_WARNING("listener: %s", st.ToString().c_str());
  });
}

void Worker::OnAccept(const ListenSocket& l) {
  for (int i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED) return;
      bool resource = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
      if (accept_log_.Allow(MonotonicUs())) {
        uint64_t more = accept_log_.TakeSuppressed();
        LOG_WARNING(
            "accept: %s%s (%llu more like it since the last line)", std::strerror(err),
            resource ? "; not accepting for 100 ms (raise ulimit -n or lower maxclients)" : "",
            static_cast<unsigned long long>(more));
      }
      if (resource) PauseAccepting();
      return;
    }
    stats_.Add(stats_.connections_received);
    if (server_->protected_mode() && !IsLoopbackPeer(peer)) {
      stats_.Add(stats_.rejected);
      RefuseAndClose(fd, l.protocol, kDeniedReply);
      continue;
    }
    if (!server_->TryAcquireClientSlot()) {
      stats_.Add(stats_.rejected);
      RefuseAndClose(fd, l.protocol, "-" + std::string(kErrMaxClients) + "\r\n");
      continue;
    }
    // Hand the connection round-robin so every worker gets its share.
    int target = server_->NextWorker();
    if (target == index_)
      AddConnection(fd, l);
    else
      server_->worker(target)->Adopt(fd, l);
  }
}

void Worker::Adopt(int fd, ListenSocket l) {
  loop_.Post([this, fd, l] { AddConnection(fd, l); });
}

void Worker::AddConnection(int fd, ListenSocket l) {
  net::Protocol protocol = l.protocol;
  bool tls = l.tls;
  if (shutting_down_) {
    ::close(fd);
    server_->clients().ReleaseSlot();
    return;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<net::TlsSession> session;
  if (tls) {
    if (auto ctx = server_->listeners().tls_context())
      session = net::TlsSession::Accept(std::move(ctx), fd);
    if (session == nullptr) {
      LOG_WARNING("TLS: cannot start a session for a new client; closing it");
      ::close(fd);
      server_->clients().ReleaseSlot();
      return;
    }
  }
  uint64_t id = server_->clients().NextId();
  auto conn = std::make_unique<Connection>(this, server_->service(), fd, id, PeerText(fd, false),
                                           PeerText(fd, true), protocol);
  Connection* c = conn.get();
  if (session) c->SetTls(std::move(session));
  conns_.emplace(id, std::move(conn));
  if (c->Start()) c->OnEvent(EPOLLIN);  // data may have arrived before registration
}

void Worker::Release(Connection* c) {
  held_.Drop(c);
  uint64_t id = c->id();
  loop_.Defer([this, id] {
    conns_.erase(id);
    MaybeStop();
  });
}

void Worker::Kill(uint64_t client_id) {
  loop_.Post([this, client_id] {
    auto it = conns_.find(client_id);
    if (it != conns_.end()) it->second->Close("killed by CLIENT KILL");
  });
}

void Worker::CompleteDeferred(uint64_t client_id, uint64_t slot, DeferredReply::WriteFn fn) {
  auto finish = [this, client_id, slot, fn = std::move(fn)] {
    // By id, not by pointer: the client may have gone (and been freed) since.
    auto it = conns_.find(client_id);
    if (it != conns_.end()) it->second->FinishDeferred(slot, fn);
  };
  // Completed on this worker's own thread (a read of its tier ring): after the
  // current batch of events, without waking the loop through its eventfd.
  if (t_worker == this)
    loop_.Defer(std::move(finish));
  else
    loop_.Post(std::move(finish));
}

void Worker::ResumeAfter(uint64_t client_id, uint64_t delay_ms) {
  loop_.AddTimer(delay_ms, false, [this, client_id] {
    auto it = conns_.find(client_id);  // by id: the client may be gone
    if (it != conns_.end()) it->second->ResumePostponed();
  });
}

void Worker::WaitDurable(Connection* c, uint64_t lsn) { held_.Hold(c, lsn); }

void Worker::Cron() {                             // once a second
  if (tier_ring_ != nullptr) tier_ring_->Reap();  // retries a submission the kernel refused
  uint64_t timeout = server_->settings().timeout_s();
  uint64_t now = MonotonicUs();
  std::vector<Connection*> check;
  check.reserve(conns_.size());
  for (auto& [id, c] : conns_)
    if (!c->closed()) check.push_back(c.get());
  for (Connection* c : check) {
    // Soft output limit of clients that stopped reading (no command runs then).
    if (!c->Cron(now)) continue;
    if (timeout == 0 || shutting_down_ || c->has_pending_reply()) continue;
    // Idle: no command and no byte moving either way (reads of a big argument
    // and writes to a slow reader stamp it too) for `timeout` seconds. A client
    // waiting for a reply completed later (SAVE) is not idle.
    uint64_t last = c->info().last_active_us.load(std::memory_order_relaxed);
    if (now > last && now - last > timeout * 1000000ull) {
      LOG_VERBOSE("Closing idle client id=%llu addr=%s", static_cast<unsigned long long>(c->id()),
                  c->info().addr.c_str());
      c->Close("idle timeout");
    }
  }
  // Safety net for a missed wakeup.
  if (!held_.empty()) held_.Release();
}

void Worker::BeginShutdown(std::function<void()> done) {
  loop_.Post([this, done = std::move(done)] {
    shutting_down_ = true;
    for (const ListenSocket& l : listeners_)
      if (l.fd >= 0) loop_.Remove(l.fd);  // no-op while accepts are paused
    for (auto& [id, c] : conns_) c->StopReading();
    done();
  });
}

void Worker::FinishShutdown(uint64_t deadline_ms) {
  loop_.Post([this, deadline_ms] {
    stopping_ = true;
    std::vector<Connection*> all;
    for (auto& [id, c] : conns_) all.push_back(c.get());
    for (Connection* c : all) c->CloseWhenDrained();
    loop_.AddTimer(deadline_ms, false, [this] {
      for (auto& [id, c] : conns_)
        if (!c->closed()) c->Close("shutdown deadline");
      loop_.Stop();
    });
    MaybeStop();
  });
}

void Worker::MaybeStop() {
  if (stopping_ && conns_.empty()) loop_.Stop();
}

}  // namespace pion::server
