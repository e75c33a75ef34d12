#include "server/kv_events.h"

#include <vector>

#include "base/clock.h"
#include "server/config.h"

namespace pion::server {

namespace {

// The calling thread's events since its last flush, where they go, and when
// the first of them was made.
struct Pending {
  KvEvents* owner = nullptr;
  events::KvEventPublisher* pub = nullptr;
  uint64_t batch_us = 0;
  uint64_t first_us = 0;    // MonotonicUs of the first pending event
  bool loop_owned = false;  // a worker: its loop's turn hook flushes
  std::vector<events::KvEvent> events;
};
thread_local Pending tls_pending;

double WallSeconds() { return static_cast<double>(UnixMicros()) / 1e6; }

}  // namespace

Result<std::unique_ptr<KvEvents>> KvEvents::Start(const Config& cfg, int resp_port) {
  if (cfg.kv_events_endpoint.empty()) return std::unique_ptr<KvEvents>();
  events::KvEventOptions o;
  o.endpoint = cfg.kv_events_endpoint;
  o.topic = cfg.kv_events_topic.empty()
                ? "kv@" + cfg.bind + ":" + std::to_string(resp_port) + "@pion"
                : cfg.kv_events_topic;
  o.replay_endpoint = cfg.kv_events_replay_endpoint;
  o.buffer_steps = cfg.kv_events_buffer_steps;
  o.hwm = static_cast<int>(cfg.kv_events_hwm);
  o.medium = cfg.kv_events_medium;
  o.max_queue = cfg.kv_events_max_queue;
  std::unique_ptr<KvEvents> ev(new KvEvents(std::move(o), cfg.kv_events_batch_us));
  Status s = ev->pub_.Start();
  if (!s.ok()) return s;
  return ev;
}

KvEvents::~KvEvents() {
  if (store_ != nullptr) store_->SetBlockTableObserver(nullptr);
  pub_.Stop();
}

void KvEvents::Attach(store::Store* store) {
  events::KvEventBatch first;
  first.ts = WallSeconds();
  first.events.emplace_back();  // AllBlocksCleared
  for (const store::ResidentTable& t : store->ResidentBlockTables()) {
    events::KvEvent e;
    e.type = events::KvEventType::kBlockStored;
    e.block_hashes = t.table->hashes;
    e.parent_block_hash = t.parent_hash;
    e.block_size = t.table->block_size;
    first.events.push_back(std::move(e));
  }
  for (store::ResidentBlockRun& run : store->ResidentBlockKeys()) {
    events::KvEvent e;
    e.type = events::KvEventType::kBlockStored;
    e.block_hashes = std::move(run.hashes);
    e.parent_block_hash = run.parent_hash;
    e.block_size = run.tokens;
    first.events.push_back(std::move(e));
  }
  pub_.Submit(std::move(first));
  store_ = store;
  store->SetBlockTableObserver(this);
}

void KvEvents::Append(events::KvEvent&& e) {
  Pending& p = tls_pending;
  if (p.events.empty()) {
    p.owner = this;
    p.pub = &pub_;
    p.batch_us = batch_us_;
    p.first_us = MonotonicUs();
  }
  p.events.push_back(std::move(e));
}

void KvEvents::OnBlocksStored(const store::BlockTable& table, std::optional<uint64_t> parent) {
  events::KvEvent e;
  e.type = events::KvEventType::kBlockStored;
  e.block_hashes = table.hashes;
  e.parent_block_hash = parent;
  e.block_size = table.block_size;
  Append(std::move(e));
}

void KvEvents::OnBlocksRemoved(const store::BlockTable& table) {
  events::KvEvent e;
  e.type = events::KvEventType::kBlockRemoved;
  e.block_hashes = table.hashes;
  Append(std::move(e));
}

void KvEvents::OnBlockKeysStored(std::span<const uint64_t> hashes,
                                 std::optional<uint64_t> parent_hash, uint32_t tokens) {
  events::KvEvent e;
  e.type = events::KvEventType::kBlockStored;
  e.block_hashes.assign(hashes.begin(), hashes.end());
  e.parent_block_hash = parent_hash;
  e.block_size = tokens;
  Append(std::move(e));
}

void KvEvents::OnBlockKeyRemoved(uint64_t hash) {
  // Removals in a row (a DEL of many keys, an eviction run) share one event.
  std::vector<events::KvEvent>& pending = tls_pending.events;
  if (tls_pending.owner == this && !pending.empty() &&
      pending.back().type == events::KvEventType::kBlockRemoved) {
    pending.back().block_hashes.push_back(hash);
    return;
  }
  events::KvEvent e;
  e.type = events::KvEventType::kBlockRemoved;
  e.block_hashes.push_back(hash);
  Append(std::move(e));
}

void KvEvents::OnAllBlocksCleared() { Append(events::KvEvent{}); }

void KvEvents::FlushThread() {
  Pending& p = tls_pending;
  if (p.events.empty()) return;
  events::KvEventBatch b;
  b.ts = WallSeconds();
  b.events.swap(p.events);
  p.events.reserve(b.events.size());  // the next batch is about as large
  p.pub->Submit(std::move(b));
}

void KvEvents::CommandDone() {
  Pending& p = tls_pending;
  if (p.events.empty()) return;
  if (!p.loop_owned || (p.batch_us > 0 && MonotonicUs() - p.first_us >= p.batch_us)) FlushThread();
}

void KvEvents::LoopOwnsThread() { tls_pending.loop_owned = true; }

int64_t KvEvents::OnLoopTurn() {
  Pending& p = tls_pending;
  if (p.events.empty()) return -1;
  if (p.batch_us == 0) {
    FlushThread();
    return -1;
  }
  const uint64_t waited = MonotonicUs() - p.first_us;
  if (waited < p.batch_us) return static_cast<int64_t>(p.batch_us - waited);
  FlushThread();
  return -1;
}

}  // namespace pion::server
