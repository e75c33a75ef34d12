// Test-only: where a test command leaves the DeferredReply tickets it takes
// (on its connection's thread) for the test to complete (from its own), as in
// net/transport_test.cc and server/server_conn_test.cc.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "net/deferred_reply.h"

namespace pion::net::testing {

class TicketBox {
 public:
  void Put(std::shared_ptr<DeferredReply> t) {
    std::lock_guard<std::mutex> lk(mu_);
    tickets_.push_back(std::move(t));
    cv_.notify_all();
  }
  // The oldest ticket, waiting up to 5 s for one; null if none came.
  std::shared_ptr<DeferredReply> Take() {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::seconds(5), [this] { return !tickets_.empty(); }))
      return nullptr;
    auto t = std::move(tickets_.front());
    tickets_.pop_front();
    return t;
  }
  // Drops the tickets left (each completes with its abandoned-reply error).
  void Clear() {
    std::deque<std::shared_ptr<DeferredReply>> left;
    {
      std::lock_guard<std::mutex> lk(mu_);
      left.swap(tickets_);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<DeferredReply>> tickets_;
};

}  // namespace pion::net::testing
