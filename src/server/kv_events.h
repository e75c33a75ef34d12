// KV events (docs/kv_events.md): the store's block-table and hashed block-key
// changes (KV.BLOCK.CHAIN ... HASHES), turned into
// vLLM-format events and handed to the publisher thread (events/).
//
// The store reports changes with its locks held (store::BlockTableObserver); the
// events are appended to a buffer of the calling thread. A worker's buffer
// becomes one batch at the end of the loop turn in which it is `kv-events-batch-us`
// old (the loop sleeps no longer than that while events wait), so under load a
// worker pays one queue push per that many microseconds, whatever the command
// rate, and nothing at all with events off. Any other thread (start-up, the
// in-process tests) hands its buffer over after each command (CommandDone) or
// explicitly (FlushThread).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "events/kv_event_publisher.h"
#include "store/store.h"

namespace pion::server {

struct Config;
struct KvPendingEvents;  // kv_events.cc: a thread's events not yet sent

class KvEvents final : public store::BlockTableObserver {
 public:
  // Null when the endpoint is empty (events off); else the publisher is started
  // (an endpoint ZeroMQ refuses is an error naming it).
  static Result<std::unique_ptr<KvEvents>> Start(const Config& cfg, int resp_port);
  ~KvEvents();

  // Publishes the first batch (seq 0): AllBlocksCleared, then BlockStored for
  // every table `store` holds and every run of hashed block keys (what
  // recovery loaded), and starts observing it.
  // Call while no command runs (before serving, or while loading).
  void Attach(store::Store* store);

  void OnBlocksStored(const store::BlockTable& table, std::optional<uint64_t> parent) override;
  void OnBlocksRemoved(const store::BlockTable& table) override;
  void OnAllBlocksCleared() override;
  void OnBlockKeysStored(std::span<const uint64_t> hashes, std::optional<uint64_t> parent_hash,
                         uint32_t tokens) override;
  void OnBlockKeyRemoved(uint64_t hash) override;

  // Hands the calling thread's pending events to the publisher as one batch;
  // cheap when there are none (a thread-local test).
  static void FlushThread();
  // The end of a command (or of a read batch of commands): on a thread whose
  // event loop calls OnLoopTurn, flushes only what has waited its full delay
  // (a long turn does not hold events longer); on any other thread, flushes.
  static void CommandDone();
  // Marks the calling thread as one whose event loop calls OnLoopTurn at the
  // end of every turn (a worker), which makes CommandDone hold events back.
  static void LoopOwnsThread();
  // The turn hook of a worker's loop (net::EventLoop::SetTurnHook): flushes the
  // pending events once they have waited the delay (with a delay of 0: every
  // turn that made any), and returns how many microseconds the loop may sleep
  // before they are due (-1: nothing pending).
  static int64_t OnLoopTurn();

  events::KvEventStats Stats() const { return pub_.Stats(); }
  const events::KvEventPublisher& publisher() const { return pub_; }
  const std::string& topic() const { return topic_; }

 private:
  KvEvents(events::KvEventOptions o, uint64_t batch_us)
      : batch_us_(batch_us), medium_(o.medium), topic_(o.topic), pub_(std::move(o)) {}
  // The calling thread's pending events, now owned by this publisher.
  KvPendingEvents& Begin();
  void Stored(std::span<const uint64_t> hashes, std::optional<uint64_t> parent,
              uint32_t block_size);

  const uint64_t batch_us_;  // kv-events-batch-us
  const std::string medium_;
  std::string topic_;
  events::KvEventPublisher pub_;
  store::Store* store_ = nullptr;
};

}  // namespace pion::server
