// Connection: one client socket and its read -> parse -> dispatch -> write
// cycle (docs/ARCHITECTURE.md, "Life of a request"). The transport only: what a
// command does is the Service's (net/service.h: Dispatch, the durable LSN, the
// limits, the client-memory budget); the event-loop thread that owns the
// connection is its ConnHost.
//
//  * Reading: edge-triggered epoll; the socket is read until a short read (or,
//    once the peer's FIN was reported, until EOF) into a 64-byte-aligned query
//    buffer taken from the host's BufferPool, or, while the parser is inside a
//    big argument, straight into that argument's buffer.
//  * Every complete command is dispatched at once (pipelining of any depth);
//    replies queue in request order in the OutputQueue and the whole batch is
//    sent with writev(2) after the read batch.
//  * Backpressure: when more than kPauseOutputBytes are queued the connection
//    stops executing commands (not reading: a client that writes its whole
//    pipeline before it reads must not deadlock) and resumes below
//    kResumeOutputBytes. While paused, input is buffered up to
//    client-query-buffer-limit (a client past it is closed, as Redis does) and
//    while maxmemory-clients allows (else reading waits: TCP pushes back).
//  * Output limits (client-output-buffer-limit normal <hard> <soft> <secs>):
//    what the client holds (unsent reply bytes, by reference ones included)
//    counts, every reply alike, as in Redis: one reply larger than the hard
//    limit closes even a client that reads. Above hard, or above soft for
//    longer than secs (checked per command, per write and by the host's cron),
//    the client is disconnected (logged). A client that must still authenticate may
//    hold 1 KiB (kUnauthenticatedOutputBytes) at most, as in Redis.
//  * Memory: every buffer a connection holds (query buffer, big-argument
//    buffers, output arena and owned replies) is counted in the server-wide
//    client memory (Service::ReserveClientMemory/AdjustClientMemory, bounded by
//    maxmemory-clients);
//    big allocations ask first (BufferGate) and a refusal is an -OOM reply to
//    that command, never a crash.
//  * Held replies: Service::Dispatch returns the LSN a reply must be held
//    until (see OutputQueue); a held connection registers with its host
//    (ConnHost::WaitDurable), which calls OnDurable().
//  * Replies completed later (BeginDeferred(), DeferredReply): the reply's place
//    is a slot in the OutputQueue; until it is filled the connection executes
//    none of the client's later commands (they stay buffered; reading stops
//    once kQueryBufferBytes are buffered), exactly as if the command had run
//    synchronously, while the host serves every other connection. The
//    host calls FinishDeferred() with the reply, which resumes the client.
//    A client that disconnects meanwhile is freed at once; its reply is
//    dropped (the host finds no connection with that id).
//  * Postponed requests (CLIENT PAUSE): before a RESP request runs, the
//    Service may hold it (PostponeMs); it stays parsed and unconsumed, the
//    connection reads nothing more meanwhile, and the host asks again after
//    the delay the Service named (ResumeAfter, ResumePostponed).
//  * A protocol error is answered, then the connection closes once the reply
//    is flushed; nothing else is read from it.
//  * Protocols (net/protocol.h): a RESP connection parses with RespParser and
//    answers through RespWriter, and hands each command's arguments to
//    Service::Dispatch; a fast-lane connection parses frames (FrameParser),
//    answers with response frames (FrameWriter) and hands each frame to
//    Service::DispatchFrame. Everything else above (pipelining, backpressure,
//    limits, client memory, held and deferred replies, idle time) is shared.
//
// Thread-safety: a connection lives on one host (event-loop) thread; every
// method runs there. Other threads see it only through its ClientInfo.
#pragma once

// The command layer (src/server/commands, compiled with PION_COMMAND_LAYER)
// reaches its client through net::ClientControl only, never the connection.
#ifdef PION_COMMAND_LAYER
#error "src/server/commands must not include net/connection.h (use net/client_control.h)"
#endif

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/buffer.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "net/deferred_reply.h"
#include "net/frame_parser.h"
#include "net/frame_writer.h"
#include "net/output_queue.h"
#include "net/protocol.h"
#include "net/resp_parser.h"
#include "net/resp_writer.h"

namespace pion::net {

class ConnHost;
class Service;
class TlsSession;

inline constexpr size_t kPauseOutputBytes = 32u << 20;
// The most unsent reply bytes a client that must still AUTH may hold (Redis's
// fixed 1024): more, and it is disconnected as over its output limit.
inline constexpr uint64_t kUnauthenticatedOutputBytes = 1024;
inline constexpr size_t kResumeOutputBytes = 8u << 20;
inline constexpr size_t kQueryBufferBytes = 16 * 1024;

class Connection final : public ClientControl, private BufferGate {
 public:
  Connection(ConnHost* host, Service* service, int fd, uint64_t id, std::string addr,
             std::string laddr, Protocol protocol = Protocol::kResp);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A TLS connection (before Start): the handshake runs first, driven by
  // the socket's events; every read and write then goes through `tls`.
  void SetTls(std::unique_ptr<TlsSession> tls);
  bool tls() const { return tls_ != nullptr; }
  // Registers with the loop and tells the service (OnOpen).
  bool Start();

  ClientInfo& info() { return info_; }
  uint64_t id() const { return info_.id; }
  bool closed() const { return closed_; }
  bool has_output() const { return !out_.empty(); }

  // For the service's handlers (host thread): net/client_control.h.
  Protocol protocol() const { return protocol_; }
  int proto() const override { return writer_.proto(); }
  void SetProto(int p) override;
  bool authenticated() const override { return authenticated_; }
  void SetAuthenticated(bool v) override;
  void CloseAfterReply() override { close_after_reply_ = true; }
  std::shared_ptr<DeferredReply> BeginDeferred() override;
  void StopReading() override;
  bool ReserveMemory(size_t n) override { return Reserve(n); }
  void SetReplyMode(ReplyMode m) override;
  ReplyBuilder* PushWriter() override;
  bool ReplyOverOutputLimit() override;
  OwnedBuffer TakeArgBuffer(std::string_view arg) override {
    return parser_.TakeBigArg(arg.data());
  }
  // Bytes that are not a reply to a command (MONITOR lines): queued after
  // everything queued so far and sent (host thread).
  void PushRaw(std::string_view bytes);
  // A Pub/Sub message in its RESP2 form ("*3\r\n$7\r\nmessage..."), queued
  // after everything queued so far; on a RESP3 connection its header becomes a
  // push (">3"). Sent by the next FlushPushes() (the host queues a batch, then
  // flushes each connection once). False if the output limit closed the client.
  bool QueuePush(std::string_view msg);
  void FlushPushes() { Flush(); }

  // For the host.
  void OnEvent(uint32_t events);
  void OnDurable();  // the durable LSN advanced: send what is no longer held
  // A DeferredReply was completed: write it at `slot` and resume the client.
  void FinishDeferred(uint64_t slot, const DeferredReply::WriteFn& write);
  // A request held by Service::PostponeMs: ask again, run it (and the rest) if it may.
  void ResumePostponed();
  void Close(const char* why);
  void CloseWhenDrained();  // shutdown: close once everything queued is sent
  uint64_t hold_lsn() const { return out_.HeadHold(); }
  // The host's once-a-second check: the soft output limit of a client that
  // is not reading. False if it closed the client.
  bool Cron(uint64_t now_us);
  bool has_pending_reply() const { return out_.pending_slots() > 0; }

 private:
  void HandleRead();
  void ProcessInput();
  // Runs the request the parser completed (arguments or a frame).
  void RunRequest();
  // The reply builder of this connection's protocol, and its error count.
  ReplyBuilder& reply() {
    return protocol_ == Protocol::kResp ? static_cast<ReplyBuilder&>(writer_) : frame_writer_;
  }
  uint64_t reply_errors() const {
    return protocol_ == Protocol::kResp ? writer_.errors() : frame_writer_.errors();
  }
  void Flush();
  bool EnsureReadSpace(size_t want);
  void MaybeResume();
  // Returns the buffers an idle connection need not keep: the empty query
  // buffer when it is large or `idle` (the cron, after 2 s without activity).
  void ReleaseIdleBuffers(bool idle);
  // ClientInfo's qbuf and qbuf-free (CLIENT LIST).
  void PublishQueryBuffer();
  bool Reserve(size_t n) override;
  // Publishes what this connection holds to the server-wide client memory.
  void ReportMemory();
  // Enforces client-output-buffer-limit; false if it closed the client.
  bool CheckOutputLimits(uint64_t now_us);
  void RejectedCommand();
  void BeginDiscard();
  void EndDiscard();
  ssize_t ReadSome(void* buf, size_t n);
  ssize_t WriteSome(const iovec* iov, int n);

  ConnHost* host_;
  Service* service_;
  int fd_;
  std::unique_ptr<TlsSession> tls_;
  ClientInfo info_;
  Protocol protocol_;
  // The protocol's parser: resp_ or frames_ (the other one stays empty).
  std::unique_ptr<RespParser> resp_;
  std::unique_ptr<FrameParser> frames_;
  RequestParser& parser_;
  RespWriter writer_;
  FrameWriter frame_writer_;
  OutputQueue out_;
  IoBuf in_;
  size_t in_start_ = 0, in_end_ = 0;
  bool authenticated_ = true;
  bool closed_ = false;
  bool close_after_reply_ = false;
  bool read_eof_ = false;
  // The peer's FIN (or an error) was reported: read to EOF even after a short read.
  bool peer_hup_ = false;
  bool paused_ = false;  // output backpressure
  // The parsed request waits (CLIENT PAUSE, Service::PostponeMs): it stays in
  // the parser, unconsumed, and nothing more is read until it ran.
  bool postponed_ = false;
  bool stop_reading_ = false;     // protocol error, QUIT, shutdown
  bool in_read_ = false;          // re-entrancy guard
  bool waiting_durable_ = false;  // registered with the host
  uint64_t next_slot_ = 0;        // DeferredReply slot ids
  int64_t mem_reported_ = 0;      // bytes of client memory counted for this client
  uint64_t soft_since_us_ = 0;    // above the soft limit since (0 = not above)
  // CLIENT REPLY: replies are written to discard_ (then dropped) instead of out_.
  bool reply_off_ = false;
  bool skip_next_ = false;     // drop the next command's reply
  bool skip_set_now_ = false;  // SKIP was set by the command running now
  std::unique_ptr<OutputQueue> discard_;
  RespWriter push_writer_;               // PushWriter(): straight to out_
  std::vector<uint64_t> discard_slots_;  // deferred replies to drop
};

}  // namespace pion::net
