// DeferredReply: a reply a command handler completes later, from any thread
// (docs/ARCHITECTURE.md "Life of a request", step 6). A handler takes a ticket
// (the server's ctx.Defer()) instead of writing a reply, hands it to background
// work, and that work calls Complete() once, typically with SimpleString("OK")
// or Error(line).
//
// The ticket names its connection by client id and a per-connection slot, never
// by pointer: Complete() posts the reply to the owning host's loop
// (ConnHost::CompleteDeferred, an eventfd wakeup), which looks the connection
// up; if the client is gone by then the reply is dropped. The connection
// reserved the reply's place in its output queue when the ticket was taken, so
// the reply goes out in request order, and it runs no further command of that
// client until the reply is completed (see Connection). A ticket destroyed
// without Complete() completes with an error, so a client is never left
// waiting forever.
//
// Thread-safety: Complete() and its shorthands may be called from any thread;
// the first call wins, later ones are ignored. The write function runs on the
// host's thread. Every ticket must be completed or destroyed before the host
// that issued it is destroyed (the server's background tasks are).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "net/reply.h"

namespace pion::net {

class ConnHost;

class DeferredReply {
 public:
  // Writes exactly one reply (runs on the connection's host thread).
  using WriteFn = std::function<void(ReplyBuilder&)>;

  DeferredReply(ConnHost* host, uint64_t client_id, uint64_t slot)
      : host_(host), client_id_(client_id), slot_(slot) {}
  ~DeferredReply();
  DeferredReply(const DeferredReply&) = delete;
  DeferredReply& operator=(const DeferredReply&) = delete;

  void Complete(WriteFn fn);
  void SimpleString(std::string s);
  void Error(std::string line);  // the whole error line, without '-' and CRLF

  bool completed() const { return done_.load(std::memory_order_acquire); }
  uint64_t client_id() const { return client_id_; }

 private:
  ConnHost* host_;
  uint64_t client_id_;
  uint64_t slot_;
  std::atomic<bool> done_{false};
};

}  // namespace pion::net
