// ClientPause: CLIENT PAUSE and CLIENT UNPAUSE (Redis's). Until its end (unix
// ms) the write commands (with `all`, every command) of every client wait
// before they run (CommandService::PostponeMs reads end_ms() and all() before
// each command); a pause in force is only lengthened or widened by another.
// The server owns one (Server::client_pause(), CommandEnv::client_pause()).
//
// Thread-safety: any thread. Pause and Unpause serialise on mu_; the readers
// load the two atomics without it (one relaxed load per command while no pause
// was ever set).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace pion::server {

class ClientPause {
 public:
  ClientPause() = default;
  ClientPause(const ClientPause&) = delete;
  ClientPause& operator=(const ClientPause&) = delete;

  // Pauses until `end_ms` (unix ms); with `all` every command, else the writes.
  void Pause(int64_t end_ms, bool all) EXCLUDES(mu_);
  // Ends the pause in force.
  void Unpause() EXCLUDES(mu_);
  // The pause in force: its end (unix ms; 0 = none; one in the past is over)
  // and whether it holds every command.
  int64_t end_ms() const { return end_ms_.load(std::memory_order_relaxed); }
  bool all() const { return all_.load(std::memory_order_relaxed); }

 private:
  base::Mutex mu_;  // Pause / Unpause (the atomics are written under it)
  std::atomic<int64_t> end_ms_{0};
  std::atomic<bool> all_{false};
};

}  // namespace pion::server
