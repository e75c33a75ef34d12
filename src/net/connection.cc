#include "net/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/check.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/resp_errors.h"
#include "net/service.h"
#include "net/tls.h"

namespace pion::net {

namespace {
constexpr int kMaxIov = IOV_MAX < 1024 ? IOV_MAX : 1024;
constexpr int kMaxReadsPerEvent = 64;  // then yield to other sockets
// Buffers from this size up ask the client-memory gate before they are taken.
constexpr size_t kGatedBytes = 1u << 20;
// A connection reports what it holds when that moved by this much (so small
// commands touch no shared counter).
constexpr int64_t kReportSlack = 64 * 1024;
// An empty query buffer of at most this size is kept while the client is
// active and returned to the pool once it has been idle kQueryBufferIdleUs (as
// Redis frees an idle client's query buffer after 2 s); a larger one is
// returned at once.
constexpr size_t kKeepQueryBufferBytes = 32 * 1024;
constexpr uint64_t kQueryBufferIdleUs = 2'000'000;
}  // namespace

namespace {
template <typename P>
std::unique_ptr<P> MakeParserIf(bool want, BufferPool* pool) {
  return want ? std::make_unique<P>(pool) : nullptr;
}
}  // namespace

Connection::Connection(ConnHost* host, Service* service, int fd, uint64_t id, std::string addr,
                       std::string laddr, Protocol protocol)
    : host_(host),
      service_(service),
      fd_(fd),
      protocol_(protocol),
      resp_(MakeParserIf<RespParser>(protocol == Protocol::kResp, &host->pool())),
      frames_(MakeParserIf<FrameParser>(protocol == Protocol::kFastLane, &host->pool())),
      parser_(resp_ ? static_cast<RequestParser&>(*resp_) : *frames_),
      writer_(&out_),
      frame_writer_(&out_),
      out_(&host->pool()),
      push_writer_(&out_) {
  info_.id = id;
  info_.fd = fd;
  info_.worker = host->index();
  info_.addr = std::move(addr);
  info_.laddr = std::move(laddr);
  info_.created_us = MonotonicUs();
  info_.last_active_us.store(info_.created_us, std::memory_order_relaxed);
  info_.control = this;
  parser_.set_limits(service->parser_limits());
  parser_.set_gate(this);
  SetAuthenticated(!service->auth_required());
}

void Connection::SetTls(std::unique_ptr<TlsSession> tls) { tls_ = std::move(tls); }

ssize_t Connection::ReadSome(void* buf, size_t n) {
  return tls_ ? tls_->Read(buf, n) : ::read(fd_, buf, n);
}

ssize_t Connection::WriteSome(const iovec* iov, int n) {
  if (tls_) return tls_->Writev(iov, n);
  // One buffer (every small reply batch): write(2) skips writev's iovec import.
  return n == 1 ? ::write(fd_, iov[0].iov_base, iov[0].iov_len) : ::writev(fd_, iov, n);
}

Connection::~Connection() {
  PION_CHECK(closed_);
  if (!in_.empty()) host_->pool().Put(std::move(in_));
}

bool Connection::Start() {
  service_->OnOpen(&info_);
  Status st = host_->loop().Add(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
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
  if (tls_ && !tls_->handshake_done()) {
    // Non-blocking: each event advances the handshake as far as the bytes
    // that arrived allow; a stalled peer holds only this connection.
    TlsSession::HandshakeResult r = tls_->Handshake();
    if (r == TlsSession::kFailed) {
      host_->stats().Add(host_->stats().tls_handshake_failures);
      LOG_VERBOSE("client id=%llu addr=%s: TLS handshake failed: %s",
                  static_cast<unsigned long long>(info_.id), info_.addr.c_str(),
                  tls_->error().c_str());
      Close("TLS handshake failed");
      return;
    }
    if (r == TlsSession::kWant) return;
    events |= EPOLLIN | EPOLLOUT;  // read what followed the handshake; send what is queued
  }
  if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) peer_hup_ = true;
  const bool read = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  if (read) HandleRead();
  if (closed_) return;
  // HandleRead ends with a Flush: with the queue empty since, a second one
  // (edge-triggered sockets report EPOLLOUT with every EPOLLIN) has nothing to do.
  if ((events & EPOLLOUT) && !(read && out_.empty())) {
    uint64_t sent = out_.consumed_total();
    Flush();
    // A reply draining to a slow reader is activity (idle timeout).
    if (!closed_ && out_.consumed_total() != sent)
      info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
  }
}

bool Connection::Reserve(size_t n) {
  ReportMemory();  // count what is held now, so buffers about to be replaced do not pile up
  if (!service_->ReserveClientMemory(n, &info_)) return false;
  mem_reported_ += static_cast<int64_t>(n);
  return true;
}

void Connection::ReportMemory() {
  if (closed_) return;
  int64_t held =
      static_cast<int64_t>(out_.allocated_bytes() + parser_.allocated_bytes() + in_.capacity() +
                           info_.service_mem.load(std::memory_order_relaxed) +
                           info_.multi_mem.load(std::memory_order_relaxed));
  info_.tot_mem.store(static_cast<uint64_t>(held), std::memory_order_relaxed);
  int64_t delta = held - mem_reported_;
  if (delta > -kReportSlack && delta < kReportSlack) return;
  service_->AdjustClientMemory(delta);
  mem_reported_ = held;
}

bool Connection::EnsureReadSpace(size_t want) {
  size_t len = in_end_ - in_start_;
  if (in_.empty()) {
    in_ = host_->pool().Get(std::max(kQueryBufferBytes, want));
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
  if (cap >= kGatedBytes && !Reserve(cap)) return false;
  IoBuf nb = host_->pool().TryGet(cap);
  if (nb.empty()) return false;
  std::memcpy(nb.data(), in_.data() + in_start_, len);
  host_->pool().Put(std::move(in_));
  in_ = std::move(nb);
  in_start_ = 0;
  in_end_ = len;
  return true;
}

void Connection::HandleRead() {
  if (in_read_) return;
  in_read_ = true;
  ConnStats& stats = host_->stats();
  int reads = 0;
  while (!closed_ && !stop_reading_ && !read_eof_ && !postponed_) {
    // A deferred reply is pending: its client's later commands wait unparsed;
    // buffer some (to see EOF and errors) but not without bound.
    if (out_.pending_slots() > 0 && in_end_ - in_start_ >= kQueryBufferBytes) break;
    // Output paused: commands wait, input is still read (see the header).
    if (paused_ && in_end_ - in_start_ >= service_->query_buffer_limit()) {
      LOG_WARNING("Closing client id=%llu addr=%s that reached max query buffer length (%zu bytes)",
                  static_cast<unsigned long long>(info_.id), info_.addr.c_str(),
                  in_end_ - in_start_);
      in_read_ = false;
      Close("query buffer limit");
      return;
    }
    if (++reads > kMaxReadsPerEvent) {
      // Edge-triggered: there may be more; come back after other sockets.
      host_->loop().Defer([this, id = info_.id, w = host_] {
        (void)w;
        (void)id;
        if (!closed_) HandleRead();
      });
      break;
    }
    ssize_t n;
    if (parser_.WantsDirectRead()) {
      std::span<char> t = parser_.DirectTarget();
      n = ReadSome(t.data(), t.size());
      if (n > 0) {
        parser_.DirectFilled(static_cast<size_t>(n));
        stats.Add(stats.net_in, n);
        // A big argument arriving is activity (idle timeout) before it completes.
        info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
        if (!parser_.WantsDirectRead()) ProcessInput();
        // Drained (see below); TLS returns one record per read, so it reads to EAGAIN.
        if (static_cast<size_t>(n) < t.size() && !peer_hup_ && !tls_) break;
        continue;
      }
    } else {
      size_t want = std::max<size_t>(kQueryBufferBytes,
                                     std::min<size_t>(parser_.BytesWanted(), kBigArgBytes + 64));
      if (!EnsureReadSpace(want)) {
        if (paused_) break;  // resumes once the output drained (MaybeResume)
        // One command's header or small arguments do not fit client memory.
        LOG_WARNING("client id=%llu addr=%s: query buffer: no client memory left",
                    static_cast<unsigned long long>(info_.id), info_.addr.c_str());
        reply().Error(kErrClientMemory);
        stop_reading_ = true;
        close_after_reply_ = true;
        break;
      }
      size_t space = in_.capacity() - in_end_;
      n = ReadSome(in_.data() + in_end_, space);
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
        if (static_cast<size_t>(n) < space && !peer_hup_ && !tls_) break;
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
  if (read_eof_ && out_.pending_slots() == 0 && !postponed_) {
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
  if (!postponed_) ReleaseIdleBuffers(false);  // a postponed request keeps the parser's buffers
  PublishQueryBuffer();
  ReportMemory();
}

void Connection::PublishQueryBuffer() {
  info_.qbuf.store(parser_.unparsed_bytes(in_end_ - in_start_), std::memory_order_relaxed);
  info_.qbuf_free.store(in_.empty() ? 0 : in_.capacity() - in_end_, std::memory_order_relaxed);
}

void Connection::ReleaseIdleBuffers(bool idle) {
  if (in_start_ == in_end_ && !in_.empty() && !parser_.WantsDirectRead() &&
      (idle || in_.capacity() > kKeepQueryBufferBytes)) {
    host_->pool().Put(std::move(in_));
    in_ = IoBuf();
    in_start_ = in_end_ = 0;
  }
  out_.ShrinkIdle(1u << 20);
  parser_.ShrinkIdle();
}

void Connection::ProcessInput() {
  // Messages published to this worker's clients before this input was read go
  // out first (Pub/Sub ordering: a message published before a command is read
  // precedes that command's reply).
  host_->BeforeInput();
  if (closed_) return;
  // One batch for the service (Service::BeginBatch): ended on every return.
  service_->BeginBatch();
  struct BatchEnd {
    Service* s;
    ~BatchEnd() { s->EndBatch(); }
  } batch_end{service_};
  // Activity is stamped once per batch of input (as Redis does on read), not per
  // command: a clock read per pipelined command was ~2 % of a -P 16 PING profile.
  info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
  // Below the smallest output limit no check is needed (two loads per batch,
  // one compare per command).
  // An unauthenticated client may hold 1 KiB of replies at most (see CheckOutputLimits).
  const uint64_t check_above =
      authenticated_
          ? service_->output_check_threshold()
          : std::min<uint64_t>(service_->output_check_threshold(), kUnauthenticatedOutputBytes);
  while (!closed_ && !stop_reading_ && !paused_ && out_.pending_slots() == 0) {
    // A postponed request is still the parser's (nothing was read since).
    RequestParser::Result r = postponed_
                                  ? RequestParser::Result::kCommand
                                  : parser_.Parse(in_.data() + in_start_, in_end_ - in_start_);
    if (r == RequestParser::Result::kNeedMore) break;
    if (r == RequestParser::Result::kError) {
      ConnStats& stats = host_->stats();
      stats.Add(stats.protocol_errors);
      LOG_VERBOSE("client id=%llu addr=%s: %s", static_cast<unsigned long long>(info_.id),
                  info_.addr.c_str(), parser_.error().c_str());
      reply().Error(parser_.error());
      stop_reading_ = true;
      close_after_reply_ = true;
      break;
    }
    if (resp_ != nullptr && !parser_.rejected() && !resp_->args().empty()) {
      ConnContext pc{this, &info_, authenticated_};
      if (uint64_t wait_ms = service_->PostponeMs(resp_->args(), pc); wait_ms > 0) [[unlikely]] {
        postponed_ = true;
        host_->ResumeAfter(info_.id, wait_ms);
        break;
      }
    }
    postponed_ = false;
    if (parser_.rejected())
      RejectedCommand();
    else
      RunRequest();
    in_start_ += parser_.command_bytes();
    parser_.ConsumeCommand();
    if (in_start_ == in_end_) in_start_ = in_end_ = 0;
    if (closed_) return;
    if (close_after_reply_) stop_reading_ = true;
    if (out_.held_bytes() > check_above && !CheckOutputLimits(0)) return;
    if (out_.bytes() > kPauseOutputBytes) paused_ = true;
  }
}

void Connection::RejectedCommand() {
  ConnStats& stats = host_->stats();
  stats.Add(stats.commands);
  stats.Add(stats.error_replies);
  bool skip = skip_next_;  // CLIENT REPLY OFF|SKIP applies to refused commands too
  skip_next_ = false;
  if (reply_off_ || skip) BeginDiscard();
  reply().Error(parser_.reject_reason() == RequestParser::Reject::kGate ? kErrClientMemory
                                                                        : kErrNoMemory);
  if (writer_.out() != &out_) EndDiscard();
}

bool Connection::CheckOutputLimits(uint64_t now_us) {
  uint64_t held = out_.held_bytes();
  if (held == 0) {
    soft_since_us_ = 0;
    return true;
  }
  uint64_t hard, soft, soft_seconds;
  if (info_.pubsub.load(std::memory_order_relaxed)) {
    Service::OutputLimits l = service_->pubsub_output_limits();
    hard = l.hard;
    soft = l.soft;
    soft_seconds = l.soft_seconds;
  } else {
    hard = service_->output_limit();
    soft = service_->output_soft_limit();
    soft_seconds = service_->output_soft_seconds();
  }
  uint64_t limit = 0;
  if (!authenticated_ && held > kUnauthenticatedOutputBytes) {
    // As Redis: a client that has not authenticated (where AUTH is required)
    // may not pile up replies it does not read (NOAUTH after NOAUTH).
    hard = limit = kUnauthenticatedOutputBytes;
  } else if (hard > 0 && held > hard) {
    limit = hard;
  } else if (soft > 0 && held > soft) {
    if (now_us == 0) now_us = MonotonicUs();
    if (soft_since_us_ == 0)
      soft_since_us_ = now_us;
    else if (now_us - soft_since_us_ > soft_seconds * 1000000ull)
      limit = soft;
  } else {
    soft_since_us_ = 0;
  }
  if (limit == 0) return true;
  ConnStats& stats = host_->stats();
  stats.Add(stats.output_limit_disconnects);
  LOG_WARNING(
      "Client id=%llu addr=%s closed for overcoming of output buffer limits (%llu > %llu bytes%s)",
      static_cast<unsigned long long>(info_.id), info_.addr.c_str(),
      static_cast<unsigned long long>(held), static_cast<unsigned long long>(limit),
      limit == hard ? "" : ", soft limit");
  Close("output buffer limit");
  return false;
}

bool Connection::ReplyOverOutputLimit() {
  if (writer_.out() != &out_) return false;  // CLIENT REPLY OFF|SKIP: nothing kept
  uint64_t held = out_.held_bytes();
  uint64_t hard = info_.pubsub.load(std::memory_order_relaxed)
                      ? service_->pubsub_output_limits().hard
                      : service_->output_limit();
  return (hard > 0 && held > hard) || (!authenticated_ && held > kUnauthenticatedOutputBytes);
}

bool Connection::Cron(uint64_t now_us) {
  if (closed_) return true;
  if (!in_.empty() && !postponed_ &&
      now_us > info_.last_active_us.load(std::memory_order_relaxed) + kQueryBufferIdleUs) {
    ReleaseIdleBuffers(true);
    PublishQueryBuffer();
    ReportMemory();
  }
  return CheckOutputLimits(now_us);
}

void Connection::RunRequest() {
  // An empty RESP command (`*0`, a blank inline line) is skipped.
  if (resp_ != nullptr && resp_->args().empty()) return;
  ConnStats& stats = host_->stats();
  stats.Add(stats.commands);
  uint64_t errors_before = reply_errors();
  OutputQueue::Mark mark = out_.GetMark();
  ConnContext ctx{this, &info_, authenticated_};
  // CLIENT REPLY OFF|SKIP (RESP only): this command's reply goes to a scratch queue.
  bool skip = skip_next_;
  skip_next_ = false;
  if (reply_off_ || skip) BeginDiscard();
  uint64_t hold_until = resp_ != nullptr
                            ? service_->Dispatch(resp_->args(), writer_, ctx)
                            : service_->DispatchFrame(frames_->frame(), frame_writer_, ctx);
  if (skip_set_now_) {
    skip_set_now_ = false;
    skip_next_ = true;
  }
  if (writer_.out() != &out_) EndDiscard();
  if (hold_until > service_->durable_lsn()) out_.HoldFrom(mark, hold_until);
  if (reply_errors() != errors_before) stats.Add(stats.error_replies);
}

void Connection::Flush() {
  if (closed_) return;
  uint64_t durable = service_->durable_lsn();
  ConnStats& stats = host_->stats();
  iovec iov[kMaxIov];
  while (true) {
    int n = out_.Writable(durable, iov, kMaxIov);
    if (n <= 0) break;
    size_t want = 0;
    for (int i = 0; i < n; ++i) want += iov[i].iov_len;
    ssize_t w = WriteSome(iov, n);
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
  ReportMemory();
  if (out_.empty()) {
    soft_since_us_ = 0;  // drained: a later excess starts the soft-limit clock anew
    if (close_after_reply_) {
      Close(stop_reading_ ? "closed after reply" : "client closed connection");
      return;
    }
  } else if (out_.HeadHold() > durable && !waiting_durable_) {
    waiting_durable_ = true;
    host_->WaitDurable(this, out_.HeadHold());
  }
  MaybeResume();
}

void Connection::MaybeResume() {
  if (!paused_ || out_.bytes() >= kResumeOutputBytes || closed_) return;
  paused_ = false;
  // Parse what is already buffered, then read again (edge-triggered: no new
  // event comes for bytes that arrived while paused).
  host_->loop().Defer([this] {
    if (closed_ || paused_) return;
    ProcessInput();
    if (!closed_) HandleRead();
  });
}

void Connection::BeginDiscard() {
  if (!discard_) discard_ = std::make_unique<OutputQueue>(nullptr);
  writer_.set_out(discard_.get());
}

void Connection::EndDiscard() {
  writer_.set_out(&out_);
  discard_.reset();  // the dropped replies (and any pins they held)
}

void Connection::SetReplyMode(ReplyMode m) {
  switch (m) {
    case ReplyMode::kOn:
      reply_off_ = false;
      skip_next_ = false;
      writer_.set_out(&out_);  // this command's own reply (+OK) is sent
      break;
    case ReplyMode::kOff:
      reply_off_ = true;
      BeginDiscard();
      break;
    case ReplyMode::kSkip:
      skip_set_now_ = true;
      BeginDiscard();
      break;
  }
}

void Connection::PushRaw(std::string_view bytes) {
  if (closed_) return;
  out_.Append(bytes);
  if (!CheckOutputLimits(0)) return;
  Flush();
}

ReplyBuilder* Connection::PushWriter() {
  if (protocol_ != Protocol::kResp || writer_.out() == &out_) return nullptr;
  push_writer_.set_proto(writer_.proto());
  return &push_writer_;
}

bool Connection::QueuePush(std::string_view msg) {
  if (closed_) return false;
  if (writer_.proto() == 3 && !msg.empty() && msg[0] == '*') {
    out_.Append(">");
    out_.Append(msg.substr(1));
  } else {
    out_.Append(msg);
  }
  return CheckOutputLimits(0);
}

std::shared_ptr<DeferredReply> Connection::BeginDeferred() {
  uint64_t slot = ++next_slot_;
  out_.AddSlot(slot);
  if (writer_.out() != &out_) discard_slots_.push_back(slot);
  return std::make_shared<DeferredReply>(host_, info_.id, slot);
}

void Connection::FinishDeferred(uint64_t slot, const DeferredReply::WriteFn& write) {
  if (closed_) return;
  // Encode into a scratch queue (same protocol), then place it at the slot.
  OutputQueue scratch(nullptr);
  uint64_t errors = 0;
  if (protocol_ == Protocol::kResp) {
    RespWriter w(&scratch);
    w.set_proto(writer_.proto());
    write(w);
    errors = w.errors();
  } else {
    FrameWriter w(&scratch);
    write(w);
    errors = w.errors();
  }
  if (errors > 0) {
    ConnStats& stats = host_->stats();
    stats.Add(stats.error_replies);
  }
  // The reply moves into its slot: a value sent by reference stays so.
  auto drop = std::find(discard_slots_.begin(), discard_slots_.end(), slot);
  bool filled;
  if (drop != discard_slots_.end()) {
    discard_slots_.erase(drop);
    filled = out_.FillSlot(slot, {});  // CLIENT REPLY OFF|SKIP when it was issued
  } else {
    filled = out_.FillSlotFrom(slot, scratch);
  }
  if (!filled) return;
  info_.last_active_us.store(MonotonicUs(), std::memory_order_relaxed);
  Flush();
  if (closed_ || out_.pending_slots() > 0) return;
  // Run the commands that arrived meanwhile, then read again (edge-triggered:
  // no new event comes for bytes left unread while the reply was pending).
  host_->loop().Defer([this] {
    if (closed_ || out_.pending_slots() > 0) return;
    ProcessInput();
    if (!closed_) HandleRead();
  });
}

void Connection::ResumePostponed() {
  if (closed_ || !postponed_) return;
  ProcessInput();
  // Read what arrived meanwhile (edge-triggered: no new event comes for it).
  if (!closed_) HandleRead();
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
  host_->loop().Remove(fd_);
  ::close(fd_);
  service_->AdjustClientMemory(-mem_reported_);
  mem_reported_ = 0;
  service_->OnClose(&info_);
  host_->Release(this);
}

}  // namespace pion::net
