#include "server/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/check.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/dispatch.h"
#include "server/server.h"
#include "server/worker.h"

namespace pion::server {

namespace {
constexpr int kMaxIov = IOV_MAX < 1024 ? IOV_MAX : 1024;
constexpr int kMaxReadsPerEvent = 64;  // then yield to other sockets
}  // namespace

Connection::Connection(Worker* worker, int fd, uint64_t id, std::string addr, std::string laddr)
    : worker_(worker),
      server_(worker->server()),
      fd_(fd),
      parser_(&worker->pool()),
      writer_(&out_),
      out_(&worker->pool()) {
  info_.id = id;
  info_.fd = fd;
  info_.worker = worker->index();
  info_.addr = std::move(addr);
  info_.laddr = std::move(laddr);
  info_.created_us = MonotonicUs();
  info_.last_active_us.store(info_.created_us, std::memory_order_relaxed);
  info_.conn = this;
  const Config& cfg = server_->config();
  ParserLimits lim;
  lim.max_bulk_len = cfg.proto_max_bulk_len;
  lim.max_args = cfg.max_multibulk_len;
  lim.max_query_bytes = cfg.client_query_buffer_limit;
  parser_.set_limits(lim);
  SetAuthenticated(cfg.requirepass.empty());
}

Connection::~Connection() {
  PION_CHECK(closed_);
  if (!in_.empty()) worker_->pool().Put(std::move(in_));
}

bool Connection::Start() {
  server_->RegisterClient(&info_);
  Status st = worker_->loop().Add(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                  [this](uint32_t ev) { OnEvent(ev); });
  if (!st.ok()) {
    LOG_WARNING("client %s: %s", info_.addr.c_str(), st.ToString().c_str());
    Close("register failed");
    return false;
  }
  return true;
}

void Connection::SetProto(int p) {
  writer_.set_proto(p);
  info_.proto.store(p, std::memory_order_relaxed);
}

void Connection::SetAuthenticated(bool v) {
  authenticated_ = v;
  info_.authenticated.store(v, std::memory_order_relaxed);
  parser_.set_auth_required(!v);
}

void Connection::OnEvent(uint32_t events) {
  if (closed_) return;
  if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) peer_hup_ = true;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) HandleRead();
  if (closed_) return;
  if (events & EPOLLOUT) Flush();
}

bool Connection::EnsureReadSpace(size_t want) {
  size_t len = in_end_ - in_start_;
  if (in_.empty()) {
    in_ = worker_->pool().Get(std::max(kQueryBufferBytes, want));
    in_start_ = in_end_ = 0;
    return true;
  }
  if (in_.capacity() - in_end_ >= want) return true;
  // Slide the pending command to the front when that makes room; else grow.
  if (in_start_ > 0 && in_.capacity() - len >= want && len <= in_.capacity() / 2) {
    std::memmove(in_.data(), in_.data() + in_start_, len);
    in_start_ = 0;
    in_end_ = len;
    return true;
  }
  size_t cap = in_.capacity();
  while (cap - len < want) cap *= 2;
  IoBuf nb = worker_->pool().Get(cap);
  std::memcpy(nb.data(), in_.data() + in_start_, len);
  worker_->pool().Put(std::move(in_));
  in_ = std::move(nb);
  in_start_ = 0;
  in_end_ = len;
  return true;
}

void Connection::HandleRead() {
  if (in_read_) return;
  in_read_ = true;
  WorkerStats& stats = worker_->stats();
  int reads = 0;
  while (!closed_ && !paused_ && !stop_reading_ && !read_eof_) {
    // A deferred reply is pending: its client's later commands wait unparsed;
    // buffer some (to see EOF and errors) but not without bound.
    if (out_.pending_slots() > 0 && in_end_ - in_start_ >= kQueryBufferBytes) break;
    if (++reads > kMaxReadsPerEvent) {
      // Edge-triggered: there may be more; come back after other sockets.
      worker_->loop().Defer([this, id = info_.id, w = worker_] {
        (void)w;
        (void)id;
        if (!closed_) HandleRead();
      });
      break;
    }
    ssize_t n;
    if (parser_.WantsDirectRead()) {
      std::span<char> t = parser_.DirectTarget();
      n = ::read(fd_, t.data(), t.size());
      if (n > 0) {
        parser_.DirectFilled(static_cast<size_t>(n));
        stats.Add(stats.net_in, n);
        if (!parser_.WantsDirectRead()) ProcessInput();
        if (static_cast<size_t>(n) < t.size() && !peer_hup_) break;  // drained (see below)
        continue;
      }
    } else {
      size_t want = std::max<size_t>(kQueryBufferBytes,
                                     std::min<size_t>(parser_.BytesWanted(), kBigArgBytes + 64));
      EnsureReadSpace(want);
      size_t space = in_.capacity() - in_end_;
      n = ::read(fd_, in_.data() + in_end_, space);
      if (n > 0) {
        in_end_ += static_cast<size_t>(n);
        stats.Add(stats.net_in, n);
        ProcessInput();
        // A short read means the socket had no more bytes: stop without the
        // extra read(2) that would only return EAGAIN (one syscall of three
        // per small request). Bytes arriving after this read raise a new edge
        // (the socket's wakeup fires on every arrival), so none are missed.
        // A FIN that arrived before this read raised no new edge, though: once
        // an event has reported it, keep reading until read(2) returns 0.
        if (static_cast<size_t>(n) < space && !peer_hup_) break;
        continue;
      }
    }
    if (n == 0) {
      read_eof_ = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    LOG_VERBOSE("client id=%llu addr=%s: read: %s", static_cast<unsigned long long>(info_.id),
                info_.addr.c_str(), std::strerror(errno));
    in_read_ = false;
    Close("read error");
    return;
  }
  in_read_ = false;
  if (closed_) return;
  Flush();
  if (closed_) return;
  if (read_eof_ && out_.pending_slots() == 0) {
    // The peer closed its side: send what is queued (a half-closed client may
    // still read), then close. A peer that is gone makes the write fail.
    // (With a deferred reply pending, this is decided once it completed and
    // the commands buffered after it ran: FinishDeferred calls HandleRead.)
    if (out_.empty() || parser_.WantsDirectRead()) {
      Close("client closed connection");
      return;
    }
    close_after_reply_ = true;
  }
  info_.qbuf.store(in_end_ - in_start_ + parser_.big_bytes(), std::memory_order_relaxed);
  ReleaseIdleBuffers();
}

void Connection::ReleaseIdleBuffers() {
  if (in_start_ == in_end_ && !in_.empty() && !parser_.WantsDirectRead()) {
    worker_->pool().Put(std::move(in_));
    in_ = IoBuf();
    in_start_ = in_end_ = 0;
  }
  out_.ShrinkIdle(1u << 20);
}

void Connection::ProcessInput() {
  // Activity is stamped once per batch of input (as Redis does on read), not per
  // command: a clock read per pipelined command was ~2 % of a -P 16 PING profile.
  info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
  while (!closed_ && !stop_reading_ && !paused_ && out_.pending_slots() == 0) {
    RespParser::Result r = parser_.Parse(in_.data() + in_start_, in_end_ - in_start_);
    if (r == RespParser::Result::kNeedMore) break;
    if (r == RespParser::Result::kError) {
      WorkerStats& stats = worker_->stats();
      stats.Add(stats.protocol_errors);
      LOG_VERBOSE("client id=%llu addr=%s: %s", static_cast<unsigned long long>(info_.id),
                  info_.addr.c_str(), parser_.error().c_str());
      writer_.Error(parser_.error());
      stop_reading_ = true;
      close_after_reply_ = true;
      break;
    }
    if (!parser_.args().empty()) RunCommand(parser_.args());
    in_start_ += parser_.command_bytes();
    parser_.ConsumeCommand();
    if (in_start_ == in_end_) in_start_ = in_end_ = 0;
    if (closed_) return;
    if (close_after_reply_) stop_reading_ = true;
    // Output limits.
    uint64_t limit = server_->output_limit();
    if (limit > 0 && out_.bytes() > limit) {
      WorkerStats& stats = worker_->stats();
      stats.Add(stats.output_limit_disconnects);
      LOG_WARNING(
          "Client id=%llu addr=%s closed for overcoming of output buffer limits (%zu > %llu bytes)",
          static_cast<unsigned long long>(info_.id), info_.addr.c_str(), out_.bytes(),
          static_cast<unsigned long long>(limit));
      Close("output buffer limit");
      return;
    }
    if (out_.bytes() > kPauseOutputBytes) paused_ = true;
  }
}

void Connection::RunCommand(std::span<const std::string_view> args) {
  WorkerStats& stats = worker_->stats();
  stats.Add(stats.commands);
  uint64_t errors_before = writer_.errors();
  const CommandSpec* spec = AdmitCommand(*server_, args, authenticated_, &writer_);
  if (spec != nullptr) {
    info_.last_cmd.store(spec->name, std::memory_order_relaxed);
    OutputQueue::Mark mark = out_.GetMark();
    CommandContext ctx;
    ctx.args = args;
    ctx.reply = &writer_;
    ctx.server = server_;
    ctx.client = &info_;
    spec->handler(ctx);
    if (ctx.wait_lsn > server_->durable_lsn()) out_.HoldFrom(mark, ctx.wait_lsn);
  }
  if (writer_.errors() != errors_before) stats.Add(stats.error_replies);
}

void Connection::Flush() {
  if (closed_) return;
  uint64_t durable = server_->durable_lsn();
  WorkerStats& stats = worker_->stats();
  iovec iov[kMaxIov];
  while (true) {
    int n = out_.Writable(durable, iov, kMaxIov);
    if (n == 0) break;
    size_t want = 0;
    for (int i = 0; i < n; ++i) want += iov[i].iov_len;
    ssize_t w = ::writev(fd_, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // EPOLLOUT will follow
      LOG_VERBOSE("client id=%llu addr=%s: write: %s", static_cast<unsigned long long>(info_.id),
                  info_.addr.c_str(), std::strerror(errno));
      Close("write error");
      return;
    }
    out_.Consume(static_cast<size_t>(w));
    stats.Add(stats.net_out, static_cast<uint64_t>(w));
    if (static_cast<size_t>(w) < want) break;  // the socket buffer is full
  }
  info_.omem.store(out_.bytes(), std::memory_order_relaxed);
  if (out_.empty()) {
    if (close_after_reply_) {
      Close(stop_reading_ ? "closed after reply" : "client closed connection");
      return;
    }
  } else if (out_.HeadHold() > durable && !waiting_durable_) {
    waiting_durable_ = true;
    worker_->WaitDurable(this, out_.HeadHold());
  }
  MaybeResume();
}

void Connection::MaybeResume() {
  if (!paused_ || out_.bytes() >= kResumeOutputBytes || closed_) return;
  paused_ = false;
  // Parse what is already buffered, then read again (edge-triggered: no new
  // event comes for bytes that arrived while paused).
  worker_->loop().Defer([this] {
    if (closed_ || paused_) return;
    ProcessInput();
    if (!closed_) HandleRead();
  });
}

std::shared_ptr<DeferredReply> CommandContext::Defer() {
  PION_CHECK(client != nullptr && client->conn != nullptr && !deferred);
  deferred = true;
  return client->conn->BeginDeferred();
}

std::shared_ptr<DeferredReply> Connection::BeginDeferred() {
  uint64_t slot = ++next_slot_;
  out_.AddSlot(slot);
  return std::make_shared<DeferredReply>(worker_, info_.id, slot);
}

void Connection::FinishDeferred(uint64_t slot, const DeferredReply::WriteFn& write) {
  if (closed_) return;
  // Encode into a scratch queue (same protocol), then place it at the slot.
  OutputQueue scratch(nullptr);
  RespWriter w(&scratch);
  w.set_proto(writer_.proto());
  write(w);
  if (w.errors() > 0) {
    WorkerStats& stats = worker_->stats();
    stats.Add(stats.error_replies);
  }
  if (!out_.FillSlot(slot, scratch.CopyAll())) return;
  info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
  Flush();
  if (closed_ || out_.pending_slots() > 0) return;
  // Run the commands that arrived meanwhile, then read again (edge-triggered:
  // no new event comes for bytes left unread while the reply was pending).
  worker_->loop().Defer([this] {
    if (closed_ || out_.pending_slots() > 0) return;
    ProcessInput();
    if (!closed_) HandleRead();
  });
}

void Connection::OnDurable() {
  waiting_durable_ = false;
  Flush();
}

void Connection::StopReading() { stop_reading_ = true; }

void Connection::CloseWhenDrained() {
  stop_reading_ = true;
  close_after_reply_ = true;
  if (out_.empty()) {
    Close("server shutdown");
    return;
  }
  Flush();
}

void Connection::Close(const char* why) {
  if (closed_) return;
  closed_ = true;
  LOG_DEBUG("client id=%llu addr=%s closed: %s", static_cast<unsigned long long>(info_.id),
            info_.addr.c_str(), why);
  worker_->loop().Remove(fd_);
  ::close(fd_);
  server_->UnregisterClient(&info_);
  server_->ReleaseClientSlot();
  worker_->Release(this);
}

}  // namespace pion::server
