// KvEventPublisher: one thread that sends KV-event batches over ZeroMQ in vLLM's
// format (docs/kv_events.md) and answers replay requests. Workers hand it whole
// batches through a bounded queue and never wait on the network: a full queue
// drops the batch, a subscriber past its high-water mark makes the send fail
// and the batch is dropped for the stream (kept for replay); both are counted.
// While no subscriber's subscription matches the topic nothing is encoded or
// sent (ZeroMQ would discard it): the batch only goes to the replay buffer, as
// is, and is encoded if a replay asks for it.
//
// Thread-safety: Submit and Stats from any thread; Start and Stop from one.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "base/status.h"
#include "events/kv_event.h"
#include "events/kv_event_codec.h"

namespace pion::events {

struct KvEventOptions {
  std::string endpoint;           // PUB side: bound when it has '*', '::', ipc:// or inproc://
  std::string topic;              // first frame of every message
  std::string replay_endpoint;    // ROUTER, bound; empty: no replay
  uint64_t buffer_steps = 10000;  // batches kept for replay
  int hwm = 100000;               // per-subscriber send high-water mark (messages)
  std::string medium = "SHARED";
  uint64_t max_queue = 100000;  // batches waiting for the publisher thread
};

struct KvEventStats {
  uint64_t published = 0;  // events in batches handed to ZeroMQ
  uint64_t dropped = 0;    // events in batches that could not be queued or sent
  uint64_t batches = 0;    // batches that took a sequence number
  uint64_t replayed = 0;   // batches sent again through the replay socket
};

// Whether `endpoint` is bound (else connected), by vLLM's rule.
bool KvEventEndpointBinds(std::string_view endpoint);

class KvEventPublisher {
 public:
  explicit KvEventPublisher(KvEventOptions o);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Opens the sockets and starts the thread. An endpoint ZeroMQ refuses is an
  // error that names it.
  Status Start();
  // Queues one batch and takes its sequence number (in submission order). Never
  // blocks on I/O; false, and the events counted as dropped, when the queue is full.
  bool Submit(KvEventBatch&& batch);
  // The same for events a worker encoded as it made them (kv_event_codec.h): the
  // publisher only wraps them, formed at `ts`.
  bool Submit(double ts, KvEncodedEvents&& events);
  // Sends what is queued, then stops the thread and closes the sockets.
  void Stop();
  KvEventStats Stats() const;
  // Whether anything would come of a batch: a subscription matches the topic
  // or there is a replay endpoint. While not, producers may skip forming
  // events at all (a subscriber that joins misses them, as ZeroMQ's slow
  // joiner misses what is sent before it connects).
  bool wanted() const { return wanted_.load(std::memory_order_relaxed); }
  // The endpoints as ZeroMQ resolved them (a wildcard port becomes the real one).
  const std::string& last_endpoint() const { return last_endpoint_; }
  const std::string& last_replay_endpoint() const { return last_replay_endpoint_; }

 private:
  struct Queued {
    uint64_t seq;
    KvEventBatch batch;    // unless `encoded`; with it, only its ts
    KvEncodedEvents body;  // with `encoded`
    bool encoded;
  };
  bool Enqueue(Queued&& q, uint64_t events);
  // A batch kept for replay: its payload once encoded, else the batch itself.
  struct Kept {
    uint64_t seq;
    bool encoded;
    std::string payload;
    KvEventBatch batch;
  };
  void Run();
  void SendBatch(Queued& q);
  void ServeReplay();
  void DrainSubscriptions();

  const KvEventOptions opt_;
  void* ctx_ = nullptr;
  void* pub_ = nullptr;
  void* router_ = nullptr;
  int wake_fd_ = -1;
  std::string last_endpoint_;
  std::string last_replay_endpoint_;
  std::thread thread_;

  std::mutex mu_;  // guards queue_, next_seq_, stopping_
  std::deque<Queued> queue_;
  uint64_t next_seq_ = 0;
  bool stopping_ = false;

  // Publisher thread only.
  std::deque<Kept> replay_;  // the last buffer_steps batches
  std::string scratch_;
  // The subscription prefixes XPUB reported, and whether one of them starts
  // the topic, i.e. whether anyone receives what is sent.
  std::set<std::string> subscriptions_;
  bool listened_ = false;

  std::atomic<uint64_t> published_{0}, dropped_{0}, batches_{0}, replayed_{0};
  std::atomic<bool> wanted_{false};
};

}  // namespace pion::events
