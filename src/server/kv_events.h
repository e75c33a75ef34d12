// KV events (docs/kv_events.md): the store's block-table and hashed block-key
// changes (KV.BLOCK.CHAIN ... HASHES), turned into
// vLLM-format events and handed to the publisher thread (events/).
//
// The store reports changes with its locks held (store::BlockTableObserver); the
// events are appended to a buffer of the calling thread, and the command layer
// hands that buffer to the publisher as one batch when the worker's read batch
// ends (FlushThread), so a worker pays one queue push per loop turn that changed
// a block table, and nothing at all with events off.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "events/kv_event_publisher.h"
#include "store/store.h"

namespace pion::server {

struct Config;

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

  events::KvEventStats Stats() const { return pub_.Stats(); }
  const events::KvEventPublisher& publisher() const { return pub_; }
  const std::string& topic() const { return topic_; }

 private:
  explicit KvEvents(events::KvEventOptions o) : topic_(o.topic), pub_(std::move(o)) {}
  void Append(events::KvEvent&& e);

  std::string topic_;
  events::KvEventPublisher pub_;
  store::Store* store_ = nullptr;
};

}  // namespace pion::server
