// ClientInfo: the part of a connection that other threads may read (CLIENT
// LIST/INFO/KILL on any worker, INFO clients). Immutable fields are set before
// the client is registered; counters are relaxed atomics written by the owning
// worker; `name` is guarded by the client registry's mutex (the Service's
// OnOpen/OnClose register and unregister it). The registry guarantees a
// ClientInfo outlives every reader holding that mutex.
//
// `control` is the owning connection as command handlers may use it
// (client_control.h): only its event-loop thread may (handlers run there).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace pion::net {

class ClientControl;

struct ClientInfo {
  uint64_t id = 0;
  int fd = -1;
  int worker = 0;           // index of the owning event-loop thread
  std::string addr;         // "ip:port" of the peer
  std::string laddr;        // "ip:port" of our side
  uint64_t created_us = 0;  // MonotonicUs()
  ClientControl* control = nullptr;
  // The Service's own per-client state (opaque here; the Service frees it in OnClose).
  void* service_data = nullptr;

  std::string name;              // guarded by the client registry's mutex
  std::string user = "default";  // who it is authenticated as; guarded like `name`
  // CLIENT SETINFO lib-name / lib-ver: guarded by the client registry's mutex.
  std::string lib_name;
  std::string lib_ver;

  // The Service's per-client state (who the client is, for its permission
  // checks), opaque to the transport. Only the owning thread uses these.
  std::shared_ptr<const void> principal;
  uint64_t principal_epoch = 0;

  std::atomic<uint64_t> last_active_us{0};  // MonotonicUs() of the last command
  // A string that lives as long as the server: the last command's name in
  // lower case, with its subcommand for container commands ("client|list").
  std::atomic<const char*> last_cmd{"NULL"};
  std::atomic<int> proto{2};
  std::atomic<bool> authenticated{true};
  std::atomic<uint64_t> qbuf{0};       // unparsed input bytes
  std::atomic<uint64_t> qbuf_free{0};  // free bytes in the query buffer
  std::atomic<uint64_t> omem{0};       // queued output bytes
  std::atomic<uint64_t> tot_mem{0};    // every buffer the connection holds
  std::atomic<bool> monitor{false};    // MONITOR issued on this connection
  // CLIENT NO-EVICT ON: never picked when client buffers pass the
  // Service's client-memory bound (CLIENT LIST flag `e`).
  std::atomic<bool> no_evict{false};
  // Subscribed to a Pub/Sub channel, pattern or shard channel (Redis's
  // CLIENT_PUBSUB): RESP2 subscribed mode, the `pubsub` output-limit class.
  std::atomic<bool> pubsub{false};
  // Its channels, patterns and shard channels (CLIENT LIST sub= psub= ssub=).
  std::atomic<uint32_t> sub{0}, psub{0}, ssub{0};
  // CLIENT TRACKING: the Service's tracking flags (its own bits; 0: off), the
  // client it redirects invalidations to (0: none), and the memory its
  // tracking state holds (BCAST prefixes), counted into tot_mem. Written by
  // the owning thread, except that another thread may add a flag bit.
  std::atomic<uint32_t> tracking{0};
  std::atomic<uint64_t> tracking_redir{0};
  std::atomic<uint64_t> service_mem{0};
  // MULTI: the commands queued (CLIENT LIST multi=; -1 outside MULTI) and the
  // memory they hold (multi-mem), counted into tot_mem. Owning thread writes.
  std::atomic<int64_t> multi{-1};
  std::atomic<uint64_t> multi_mem{0};
};

}  // namespace pion::net
