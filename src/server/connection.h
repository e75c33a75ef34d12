// Connection: one client socket and its read -> parse -> dispatch -> write
// cycle (docs/ARCHITECTURE.md, "Life of a request").
//
//  * Reading: edge-triggered epoll; the socket is read until EAGAIN into a
//    64-byte-aligned query buffer taken from the worker's BufferPool, or, while
//    the parser is inside a big argument, straight into that argument's buffer.
//  * Every complete command is dispatched at once (pipelining of any depth);
//    replies queue in request order in the OutputQueue and the whole batch is
//    sent with writev(2) after the read batch.
//  * Backpressure: when more than kPauseOutputBytes are queued the connection
//    stops parsing and reading (TCP pushes back on the client) and resumes below
//    kResumeOutputBytes; more than the client-output-buffer-limit disconnects
//    the client (logged).
//  * Deferred replies: see OutputQueue and Server (durable LSN). A held
//    connection registers with its worker, which calls OnDurable().
//  * Replies completed later (ctx.Defer(), DeferredReply): the reply's place
//    is a slot in the OutputQueue; until it is filled the connection executes
//    none of the client's later commands (they stay buffered; reading stops
//    once kQueryBufferBytes are buffered), exactly as if the command had run
//    synchronously, while the worker serves every other connection. The
//    worker calls FinishDeferred() with the reply, which resumes the client.
//    A client that disconnects meanwhile is freed at once; its reply is
//    dropped (the worker finds no connection with that id).
//  * A protocol error is answered, then the connection closes once the reply
//    is flushed; nothing else is read from it.
//
// Thread-safety: a connection lives on one worker thread; every method runs
// there. Other threads see it only through its ClientInfo.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server/buffer.h"
#include "server/client_info.h"
#include "server/deferred_reply.h"
#include "server/output_queue.h"
#include "server/resp_parser.h"
#include "server/resp_writer.h"

namespace pion::server {

class Server;
class Worker;

inline constexpr size_t kPauseOutputBytes = 32u << 20;
inline constexpr size_t kResumeOutputBytes = 8u << 20;
inline constexpr size_t kQueryBufferBytes = 16 * 1024;

class Connection {
 public:
  Connection(Worker* worker, int fd, uint64_t id, std::string addr, std::string laddr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Registers with the loop and the client registry.
  bool Start();

  ClientInfo& info() { return info_; }
  uint64_t id() const { return info_.id; }
  bool closed() const { return closed_; }
  bool has_output() const { return !out_.empty(); }

  // For handlers (worker thread).
  int proto() const { return writer_.proto(); }
  void SetProto(int p);
  bool authenticated() const { return authenticated_; }
  void SetAuthenticated(bool v);
  void CloseAfterReply() { close_after_reply_ = true; }
  // ctx.Defer(): reserves the reply's place and returns its ticket.
  std::shared_ptr<DeferredReply> BeginDeferred();

  // For the worker.
  void OnEvent(uint32_t events);
  void OnDurable();  // the durable LSN advanced: send what is no longer held
  // A DeferredReply was completed: write it at `slot` and resume the client.
  void FinishDeferred(uint64_t slot, const DeferredReply::WriteFn& write);
  void Close(const char* why);
  // Shutdown: stop reading and parsing; close once everything queued is sent.
  void StopReading();
  void CloseWhenDrained();
  uint64_t hold_lsn() const { return out_.HeadHold(); }

 private:
  void HandleRead();
  void ProcessInput();
  void RunCommand(std::span<const std::string_view> args);
  void Flush();
  bool EnsureReadSpace(size_t want);
  void MaybeResume();
  void ReleaseIdleBuffers();

  Worker* worker_;
  Server* server_;
  int fd_;
  ClientInfo info_;
  RespParser parser_;
  RespWriter writer_;
  OutputQueue out_;
  IoBuf in_;
  size_t in_start_ = 0, in_end_ = 0;
  bool authenticated_ = true;
  bool closed_ = false;
  bool close_after_reply_ = false;
  bool read_eof_ = false;
  // The peer's FIN (or an error) was reported: read to EOF even after a short read.
  bool peer_hup_ = false;
  bool paused_ = false;           // output backpressure
  bool stop_reading_ = false;     // protocol error, QUIT, shutdown
  bool in_read_ = false;          // re-entrancy guard
  bool waiting_durable_ = false;  // registered with the worker
  uint64_t next_slot_ = 0;        // DeferredReply slot ids
};

}  // namespace pion::server
