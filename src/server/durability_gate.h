// The durability gate: replies to changes wait until the log says they are
// durable.
//
// A handler that changed state returns the LSN its change was logged at; its
// connection holds that reply, and every later one, until the acknowledged
// (durable) LSN reaches it. DurabilityGate holds the acknowledged LSN, which
// the persistence layer advances with NotifyDurable(lsn) from any thread (its
// fsync thread, typically); each worker's HeldReplies keeps the connections
// that hold replies and is woken, through the worker loop, when the LSN passes
// the smallest one they wait for. Without persistence nothing is logged, every
// hold LSN is 0 and nothing is held.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace pion::net {
class Connection;
class EventLoop;
}  // namespace pion::net

namespace pion::server {

class HeldReplies;

// Thread-safety: any thread.
class DurabilityGate {
 public:
  uint64_t durable_lsn() const { return durable_lsn_.load(std::memory_order_seq_cst); }
  // Publishes that everything up to `lsn` is durable (never moves back) and
  // wakes the workers holding replies it releases.
  void NotifyDurable(uint64_t lsn);
  // Adds a worker's held replies to wake (Server::Start, before it runs).
  void Watch(HeldReplies* h);

 private:
  std::atomic<uint64_t> durable_lsn_{0};
  base::Mutex mu_;
  std::vector<HeldReplies*> watchers_ GUARDED_BY(mu_);
};

// One worker's connections that hold replies for durability. Worker thread,
// except Wake().
class HeldReplies {
 public:
  HeldReplies(const DurabilityGate* gate, net::EventLoop* loop) : gate_(*gate), loop_(*loop) {}

  // `c` holds replies until `lsn` is durable; it gets OnDurable() then.
  void Hold(net::Connection* c, uint64_t lsn);
  // A closed connection: forget it.
  void Drop(net::Connection* c) { waiting_.erase(c); }
  // Calls OnDurable() on every connection whose hold is now durable.
  void Release();
  bool empty() const { return waiting_.empty(); }
  // Any thread: schedules Release() on the loop if a hold may be satisfied.
  void Wake(uint64_t durable_lsn);

 private:
  const DurabilityGate& gate_;
  net::EventLoop& loop_;
  std::unordered_set<net::Connection*> waiting_;
  std::atomic<uint64_t> min_wait_lsn_{UINT64_MAX};
};

}  // namespace pion::server
