// The seam between the transport and what it serves. A Connection reads,
// parses and writes; everything it does not know (which commands exist, what
// they do, who may run them, the durability of their effects, the limits and
// the shared client-memory budget) it asks its Service. What it needs from the
// event-loop thread that owns it (the loop, buffers, counters, being freed,
// waiting for durability, deferred completions) it asks its ConnHost.
//
// Thread-safety: Service methods are called on every event-loop thread at once
// (an implementation is thread-safe); ConnHost methods are called on the
// host's own thread, except CompleteDeferred (any thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "net/buffer.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "net/deferred_reply.h"
#include "net/event_loop.h"
#include "net/frame_parser.h"
#include "net/reply.h"
#include "net/resp_parser.h"

namespace pion::net {

class Connection;

// What a Service may use of the connection a request came on, during Dispatch.
struct ConnContext {
  ClientControl* conn;
  ClientInfo* info;
  bool authenticated;
};

class Service {
 public:
  virtual ~Service() = default;

  // Runs one request (args[0] is the command name as sent) and writes exactly
  // one reply through `reply` (or takes a DeferredReply). Returns the hold-until
  // ticket: the LSN the reply (and every later one) must be held until
  // durable_lsn() reaches it; 0 holds nothing.
  virtual uint64_t Dispatch(std::span<const std::string_view> args, ReplyBuilder& reply,
                            ConnContext& ctx) = 0;
  // The same for one fast-lane frame (net/frame_parser.h): the service maps it
  // to its request (what the body means is the service's), writes exactly one
  // reply through `reply` (a FrameWriter: one response frame) or defers it,
  // and calls ctx.conn->CloseAfterReply() for a body it cannot read.
  virtual uint64_t DispatchFrame(const Frame& frame, ReplyBuilder& reply, ConnContext& ctx) = 0;
  // Whether a RESP request must wait before it runs (CLIENT PAUSE): 0 to run
  // it now, else the milliseconds after which to ask again. Meanwhile the
  // connection runs none of its later requests and reads nothing more.
  virtual uint64_t PostponeMs(std::span<const std::string_view> args, const ConnContext& ctx) {
    (void)args;
    (void)ctx;
    return 0;
  }
  // Brackets the requests a connection runs from one batch of input (on the
  // host's thread, never across a blocking wait): the service may keep what
  // every request needs (the server's shared exec lock) from the first
  // Dispatch of the batch to EndBatch instead of taking it per request.
  // Nested batches end with the outermost EndBatch.
  virtual void BeginBatch() {}
  virtual void EndBatch() {}
  // The LSN up to which effects are durable (replies held until it reach it).
  virtual uint64_t durable_lsn() const = 0;

  // Limits, read when the connection opens: parser limits (both protocols'),
  // and whether the client must authenticate first.
  virtual ParserLimits parser_limits() const = 0;
  virtual bool auth_required() const = 0;
  // Limits read while serving (they may change at run time): the query buffer
  // a client may fill while its output is paused, the output limits
  // (client-output-buffer-limit: hard, soft and soft seconds, 0 = none) and the
  // smallest nonzero one (UINT64_MAX when none: below it nothing is checked).
  virtual uint64_t query_buffer_limit() const = 0;
  virtual uint64_t output_limit() const = 0;
  virtual uint64_t output_soft_limit() const = 0;
  virtual uint64_t output_soft_seconds() const = 0;
  virtual uint64_t output_check_threshold() const = 0;
  // The limits of a client subscribed to Pub/Sub channels (Redis's `pubsub`
  // class of client-output-buffer-limit); by default those above.
  struct OutputLimits {
    uint64_t hard, soft, soft_seconds;
  };
  virtual OutputLimits pubsub_output_limits() const {
    return {output_limit(), output_soft_limit(), output_soft_seconds()};
  }

  // The shared client-memory budget (maxmemory-clients): Reserve admits `n`
  // more bytes for client `who` if the bound allows (and counts them); the
  // service may close clients to make room, `who` among them (then it refuses).
  // Adjust corrects the count by what a connection actually holds.
  virtual bool ReserveClientMemory(uint64_t n, const ClientInfo* who) = 0;
  virtual void AdjustClientMemory(int64_t delta) = 0;

  // A connection started (its ClientInfo may now be read by other threads) and
  // closed (after this, no other thread may read it).
  virtual void OnOpen(ClientInfo* info) = 0;
  virtual void OnClose(ClientInfo* info) = 0;
};

// The transport's counters, kept by the host (relaxed atomics: written by the
// host's thread, read by anyone).
struct ConnStats {
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> net_in{0};
  std::atomic<uint64_t> net_out{0};
  std::atomic<uint64_t> output_limit_disconnects{0};
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> error_replies{0};
  std::atomic<uint64_t> tls_handshake_failures{0};
  // The host's thread only (its connections run there): a relaxed load and
  // store, not a locked read-modify-write (otherwise one per command and two
  // per read batch, ~20 cycles each). Readers on other threads load them;
  // a reset (store 0) from another thread racing with an Add may be undone.
  void Add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

class ConnHost {
 public:
  virtual int index() const = 0;  // ClientInfo::worker
  virtual EventLoop& loop() = 0;
  virtual BufferPool& pool() = 0;
  virtual ConnStats& stats() = 0;
  // A closed connection: free it after the current batch.
  virtual void Release(Connection* c) = 0;
  // Call c->OnDurable() once the Service's durable LSN reaches `lsn`.
  virtual void WaitDurable(Connection* c, uint64_t lsn) = 0;
  // Any thread: run c->FinishDeferred(slot, fn) on the host's thread if client
  // `client_id` still exists there (dropped otherwise).
  virtual void CompleteDeferred(uint64_t client_id, uint64_t slot, DeferredReply::WriteFn fn) = 0;
  // Host thread: run c->ResumePostponed() in `delay_ms` if client `client_id`
  // still exists then (Service::PostponeMs). A host whose Service never
  // postpones need not implement it.
  virtual void ResumeAfter(uint64_t client_id, uint64_t delay_ms) {
    (void)client_id;
    (void)delay_ms;
  }
  // Called before a connection runs the commands of a batch of input: the host
  // delivers what other threads queued for its connections (Pub/Sub messages)
  // first.
  virtual void BeforeInput() {}

 protected:
  ~ConnHost() = default;
};

}  // namespace pion::net
