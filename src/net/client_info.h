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

  std::string name;  // guarded by the client registry's mutex

  std::atomic<uint64_t> last_active_us{0};    // MonotonicUs() of the last command
  std::atomic<const char*> last_cmd{"NULL"};  // a static string (the command's name)
  std::atomic<int> proto{2};
  std::atomic<bool> authenticated{true};
  std::atomic<uint64_t> qbuf{0};  // unparsed input bytes
  std::atomic<uint64_t> omem{0};  // queued output bytes
};

}  // namespace pion::net
