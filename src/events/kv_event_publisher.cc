#include "events/kv_event_publisher.h"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "events/kv_event_codec.h"

namespace pion::events {

namespace {

Status ZmqError(std::string_view what, std::string_view endpoint) {
  return Status::InvalidArgument(std::string(what) + " '" + std::string(endpoint) +
                                 "': " + zmq_strerror(zmq_errno()));
}

// Sends one frame without waiting; false when ZeroMQ would have to block.
bool SendFrame(void* sock, const void* data, size_t n, bool more) {
  return zmq_send(sock, data, n, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) >= 0;
}

std::string LastEndpoint(void* sock) {
  char buf[256];
  size_t len = sizeof(buf);
  if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf, &len) != 0 || len == 0) return "";
  return std::string(buf, strnlen(buf, len));
}

}  // namespace

bool KvEventEndpointBinds(std::string_view e) {
  return e.find('*') != std::string_view::npos || e.find("::") != std::string_view::npos ||
         e.rfind("ipc://", 0) == 0 || e.rfind("inproc://", 0) == 0;
}

KvEventPublisher::KvEventPublisher(KvEventOptions o) : opt_(std::move(o)) {}

KvEventPublisher::~KvEventPublisher() { Stop(); }

Status KvEventPublisher::Start() {
  ctx_ = zmq_ctx_new();
  if (ctx_ == nullptr) return Status::IOError("zmq_ctx_new failed");
  // ZeroMQ's I/O thread, like the publisher thread, is background work: as
  // SCHED_BATCH it does not preempt a worker on waking (both run in the
  // workers' idle moments when they share a core).
  zmq_ctx_set(ctx_, ZMQ_THREAD_SCHED_POLICY, SCHED_BATCH);
  // An XPUB that refuses (EAGAIN) instead of silently dropping when a subscriber
  // is past its high-water mark, so that drops can be counted.
  pub_ = zmq_socket(ctx_, ZMQ_XPUB);
  const int nodrop = 1, linger = 0, hwm = opt_.hwm;
  zmq_setsockopt(pub_, ZMQ_XPUB_NODROP, &nodrop, sizeof(nodrop));
  zmq_setsockopt(pub_, ZMQ_SNDHWM, &hwm, sizeof(hwm));
  zmq_setsockopt(pub_, ZMQ_LINGER, &linger, sizeof(linger));
  const bool bind = KvEventEndpointBinds(opt_.endpoint);
  if ((bind ? zmq_bind(pub_, opt_.endpoint.c_str()) : zmq_connect(pub_, opt_.endpoint.c_str())) !=
      0) {
    Status s = ZmqError("kv-events-endpoint", opt_.endpoint);
    Stop();
    return s;
  }
  last_endpoint_ = LastEndpoint(pub_);
  if (!opt_.replay_endpoint.empty()) {
    router_ = zmq_socket(ctx_, ZMQ_ROUTER);
    zmq_setsockopt(router_, ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_bind(router_, opt_.replay_endpoint.c_str()) != 0) {
      Status s = ZmqError("kv-events-replay-endpoint", opt_.replay_endpoint);
      Stop();
      return s;
    }
    last_replay_endpoint_ = LastEndpoint(router_);
  }
  wanted_.store(router_ != nullptr && opt_.buffer_steps > 0, std::memory_order_relaxed);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    Stop();
    return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

bool KvEventPublisher::Submit(KvEventBatch&& batch) {
  const uint64_t n = batch.events.size();
  return Enqueue(Queued{0, std::move(batch), KvEncodedEvents{}, false}, n);
}

bool KvEventPublisher::Submit(double ts, KvEncodedEvents&& events) {
  const uint64_t n = events.count;
  KvEventBatch stamp;
  stamp.ts = ts;
  return Enqueue(Queued{0, std::move(stamp), std::move(events), true}, n);
}

bool KvEventPublisher::Enqueue(Queued&& q, uint64_t n) {
  bool wake;
  {
    std::lock_guard<std::mutex> l(mu_);
    q.seq = next_seq_++;
    batches_.fetch_add(1, std::memory_order_relaxed);
    if (stopping_ || queue_.size() >= opt_.max_queue) {
      dropped_.fetch_add(n, std::memory_order_relaxed);
      return false;
    }
    wake = queue_.empty();
    queue_.push_back(std::move(q));
  }
  if (wake && wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t w = ::write(wake_fd_, &one, sizeof(one));
    (void)w;  // the counter cannot overflow here; a failed wake is retried by the next
  }
  return true;
}

void KvEventPublisher::Stop() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    uint64_t one = 1;
    ssize_t w = ::write(wake_fd_, &one, sizeof(one));
    (void)w;
    thread_.join();
  }
  if (pub_ != nullptr) zmq_close(pub_);
  if (router_ != nullptr) zmq_close(router_);
  if (ctx_ != nullptr) zmq_ctx_term(ctx_);
  pub_ = router_ = ctx_ = nullptr;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

KvEventStats KvEventPublisher::Stats() const {
  KvEventStats s;
  s.published = published_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.batches = batches_.load(std::memory_order_relaxed);
  s.replayed = replayed_.load(std::memory_order_relaxed);
  return s;
}

void KvEventPublisher::SendBatch(Queued& q) {
  const uint64_t n = q.encoded ? q.body.count : q.batch.events.size();
  // Without a replay endpoint nothing is kept: the buffer could never be read.
  const bool keep = router_ != nullptr && opt_.buffer_steps > 0;
  if (!listened_ && (!keep || !q.encoded)) {
    // Nobody would receive it: counted as published (a subscriber that joins
    // later can replay it), kept unencoded if it is not yet.
    published_.fetch_add(n, std::memory_order_relaxed);
    if (keep) {
      if (replay_.size() >= opt_.buffer_steps) replay_.pop_front();
      replay_.push_back(Kept{q.seq, false, std::string(), std::move(q.batch)});
    }
    return;
  }
  // Encoded into the buffer it is kept in for replay (the oldest one's, reused,
  // once the replay buffer is full).
  std::string payload;
  if (keep && replay_.size() >= opt_.buffer_steps) {
    payload = std::move(replay_.front().payload);
    replay_.pop_front();
  } else if (!keep) {
    payload = std::move(scratch_);
  }
  payload.clear();
  if (q.encoded)
    EncodeKvEventPayload(q.batch.ts, q.body, &payload);
  else
    EncodeKvEventBatch(q.batch, opt_.medium, &payload);
  if (!listened_) {  // a worker's batch, nobody listening: only kept
    published_.fetch_add(n, std::memory_order_relaxed);
    if (keep)
      replay_.push_back(Kept{q.seq, true, std::move(payload), KvEventBatch{}});
    else
      scratch_ = std::move(payload);
    return;
  }
  const std::string seq = EncodeSeq(q.seq);
  // The first frame decides: once it is accepted, ZeroMQ queues the rest of the
  // message with it.
  if (SendFrame(pub_, opt_.topic.data(), opt_.topic.size(), true)) {
    SendFrame(pub_, seq.data(), seq.size(), true);
    SendFrame(pub_, payload.data(), payload.size(), false);
    published_.fetch_add(n, std::memory_order_relaxed);
  } else {
    dropped_.fetch_add(n, std::memory_order_relaxed);
  }
  if (keep)
    replay_.push_back(Kept{q.seq, true, std::move(payload), KvEventBatch{}});
  else
    scratch_ = std::move(payload);
}

void KvEventPublisher::DrainSubscriptions() {
  // XPUB hands subscription messages up: a 1 byte then the prefix for a new
  // one, a 0 byte for one nobody holds any more (ZeroMQ reports each prefix
  // once, however many subscribers share it, and unsubscribes a subscriber
  // that disconnects).
  char buf[256];
  bool changed = false;
  for (;;) {
    const int len = zmq_recv(pub_, buf, sizeof(buf), ZMQ_DONTWAIT);
    if (len < 0) break;
    if (len == 0 || (buf[0] != 0 && buf[0] != 1)) continue;
    // A prefix longer than the buffer is kept truncated (the same way when it
    // is unsubscribed): at worst a batch is sent that nobody takes.
    const size_t plen = std::min<size_t>(static_cast<size_t>(len), sizeof(buf)) - 1;
    std::string prefix(buf + 1, plen);
    if (buf[0] == 1)
      subscriptions_.insert(std::move(prefix));
    else
      subscriptions_.erase(prefix);
    changed = true;
  }
  if (!changed) return;
  listened_ = false;
  for (const std::string& prefix : subscriptions_)
    if (std::string_view(opt_.topic).substr(0, prefix.size()) == prefix) listened_ = true;
  wanted_.store(listened_ || (router_ != nullptr && opt_.buffer_steps > 0),
                std::memory_order_relaxed);
}

void KvEventPublisher::ServeReplay() {
  for (;;) {
    // One request: every frame up to the last (the routing envelope), then the
    // 8-byte start sequence.
    std::vector<std::string> frames;
    int more = 0;
    size_t more_len = sizeof(more);
    do {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, router_, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        if (frames.empty()) return;  // nothing more waiting
        break;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      zmq_msg_close(&m);
      zmq_getsockopt(router_, ZMQ_RCVMORE, &more, &more_len);
    } while (more && frames.size() < 64);
    if (frames.size() < 2 || frames.back().size() != 8) continue;  // not a replay request
    uint64_t start = 0;
    for (unsigned char c : frames.back()) start = (start << 8) | c;
    frames.pop_back();
    auto send_prefixed = [&](std::string_view seq, std::string_view payload) {
      for (const std::string& f : frames) SendFrame(router_, f.data(), f.size(), true);
      SendFrame(router_, seq.data(), seq.size(), true);
      SendFrame(router_, payload.data(), payload.size(), false);
    };
    for (Kept& k : replay_) {
      if (k.seq < start) continue;
      if (!k.encoded) {  // published while nobody listened
        EncodeKvEventBatch(k.batch, opt_.medium, &k.payload);
        k.batch = KvEventBatch{};
        k.encoded = true;
      }
      send_prefixed(EncodeSeq(k.seq), k.payload);
      replayed_.fetch_add(1, std::memory_order_relaxed);
    }
    send_prefixed(std::string(8, '\xff'), "");
  }
}

void KvEventPublisher::Run() {
  pthread_setname_np(pthread_self(), "pion-kvevents");  // for top, perf and affinity tools
  {
    sched_param p{};
    p.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);  // best effort: see Start
  }
  std::deque<Queued> work;
  for (;;) {
    zmq_pollitem_t items[3] = {
        {nullptr, wake_fd_, ZMQ_POLLIN, 0}, {pub_, 0, ZMQ_POLLIN, 0}, {router_, 0, ZMQ_POLLIN, 0}};
    const int nitems = router_ != nullptr ? 3 : 2;
    if (zmq_poll(items, nitems, -1) < 0 && zmq_errno() != EINTR) {
      LOG_WARNING("kv events: zmq_poll: %s", zmq_strerror(zmq_errno()));
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      ssize_t r = ::read(wake_fd_, &v, sizeof(v));
      (void)r;
    }
    if (nitems == 3 && (items[2].revents & ZMQ_POLLIN)) ServeReplay();
    bool stop;
    {
      std::lock_guard<std::mutex> l(mu_);
      work.swap(queue_);
      stop = stopping_;
    }
    // Every round: who listens decides whether the batches are encoded and sent
    // (a subscription ZeroMQ has taken in but not yet reported would be missed).
    if (!work.empty() || (items[1].revents & ZMQ_POLLIN)) DrainSubscriptions();
    for (Queued& q : work) SendBatch(q);
    work.clear();
    if (stop) return;
  }
}

}  // namespace pion::events
