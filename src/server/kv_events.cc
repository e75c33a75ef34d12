#include "server/kv_events.h"

#include <vector>

#include "base/clock.h"
#include "events/kv_event_codec.h"
#include "server/config.h"

namespace pion::server {

// The calling thread's events since its last flush, where they go, and when
// the first of them was made.
struct KvPendingEvents {
  KvEvents* owner = nullptr;
  events::KvEventPublisher* pub = nullptr;
  uint64_t batch_us = 0;
  uint64_t first_us = 0;    // MonotonicUs of the first pending event
  bool loop_owned = false;  // a worker: its loop's turn hook flushes
  // The events, encoded as they come, except a run of removals still open
  // (removals in a row share one BlockRemoved): its hashes.
  events::KvEncodedEvents encoded;
  bool run_open = false;
  std::vector<uint64_t> run;
  bool empty() const { return encoded.count == 0 && !run_open; }
};

namespace {

thread_local KvPendingEvents tls_pending;

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

KvPendingEvents& KvEvents::Begin() {
  KvPendingEvents& p = tls_pending;
  if (p.empty()) {
    p.owner = this;
    p.pub = &pub_;
    p.batch_us = batch_us_;
    p.first_us = MonotonicUs();
  }
  return p;
}

namespace {
void CloseRun(KvPendingEvents& p, std::string_view medium) {
  if (!p.run_open) return;
  events::AppendKvEvent(events::KvEventType::kBlockRemoved, p.run, std::nullopt, 0, medium,
                        &p.encoded);
  p.run.clear();
  p.run_open = false;
}
}  // namespace

void KvEvents::Stored(std::span<const uint64_t> hashes, std::optional<uint64_t> parent,
                      uint32_t block_size) {
  KvPendingEvents& p = Begin();
  CloseRun(p, medium_);
  events::AppendKvEvent(events::KvEventType::kBlockStored, hashes, parent, block_size, medium_,
                        &p.encoded);
}

void KvEvents::OnBlocksStored(const store::BlockTable& table, std::optional<uint64_t> parent) {
  if (!pub_.wanted()) return;  // nobody subscribed, no replay: nothing to form
  Stored(table.hashes, parent, table.block_size);
}

void KvEvents::OnBlocksRemoved(const store::BlockTable& table) {
  if (!pub_.wanted()) return;  // nobody subscribed, no replay: nothing to form
  // Opens a run of removals: hashed keys removed right after join it.
  KvPendingEvents& p = Begin();
  CloseRun(p, medium_);
  p.run.assign(table.hashes.begin(), table.hashes.end());
  p.run_open = true;
}

void KvEvents::OnBlockKeysStored(std::span<const uint64_t> hashes,
                                 std::optional<uint64_t> parent_hash, uint32_t tokens) {
  if (!pub_.wanted()) return;
  Stored(hashes, parent_hash, tokens);
}

void KvEvents::OnBlockKeyRemoved(uint64_t hash) {
  if (!pub_.wanted()) return;  // nobody subscribed, no replay: nothing to form
  // Removals in a row (a DEL of many keys, an eviction run) share one event.
  KvPendingEvents& p = Begin();
  p.run.push_back(hash);
  p.run_open = true;
}

void KvEvents::OnAllBlocksCleared() {
  if (!pub_.wanted()) return;  // nobody subscribed, no replay: nothing to form
  KvPendingEvents& p = Begin();
  CloseRun(p, medium_);
  events::AppendKvEvent(events::KvEventType::kAllBlocksCleared, {}, std::nullopt, 0, medium_,
                        &p.encoded);
}

void KvEvents::FlushThread() {
  KvPendingEvents& p = tls_pending;
  if (p.empty()) return;
  CloseRun(p, p.owner->medium_);
  events::KvEncodedEvents batch;
  batch.body.swap(p.encoded.body);
  batch.count = p.encoded.count;
  p.encoded.count = 0;
  p.encoded.body.reserve(batch.body.size());  // the next batch is about as large
  p.pub->Submit(WallSeconds(), std::move(batch));
}

void KvEvents::CommandDone() {
  KvPendingEvents& p = tls_pending;
  if (p.empty()) return;
  if (!p.loop_owned || (p.batch_us > 0 && MonotonicUs() - p.first_us >= p.batch_us)) FlushThread();
}

void KvEvents::LoopOwnsThread() { tls_pending.loop_owned = true; }

int64_t KvEvents::OnLoopTurn() {
  KvPendingEvents& p = tls_pending;
  if (p.empty()) return -1;
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
