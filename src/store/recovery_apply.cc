// The recovery API: logged changes applied before serving (WAL replay,
// snapshot load), with nothing logged. See store.h.
#include <algorithm>
#include <mutex>

#include "base/check.h"
#include "store/namespace.h"
#include "store/store.h"

namespace pion::store {

Status Store::ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                            quant::Format fmt, const persist::BlockRecord* blocks) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes || kv_dim < 1 || kv_dim > quant::kMaxDim ||
      !quant::DimSupported(fmt, kv_dim))
    return Status::Corruption("register record with invalid namespace, kv_dim or format");
  std::shared_ptr<const BlockTable> table;
  if (blocks) table = BlockTable::Finished(*blocks);
  std::lock_guard<std::mutex> l(mu_);
  next_incarnation_ = std::max(next_incarnation_, incarnation + 1);
  // Replay never refuses what was logged; it evicts as the live server did
  // (a smaller --maxmemory than before the restart evicts more).
  auto fit_bytes = [&](const Namespace* keep, uint64_t add) {
    if (cfg_.max_bytes == 0) return;
    uint64_t unused = 0;
    (void)EvictLocked(
        keep, [&] { return bytes_ + add <= cfg_.max_bytes; }, &unused);
  };
  auto it = map_.find(ns);
  if (it != map_.end()) {
    NsPtr n = it->second;
    if (n->incarnation == incarnation && n->dim == kv_dim && n->fmt == fmt) {
      if (table) {
        uint64_t old = TableBytes(n->blocks), add = TableBytes(table);
        n->bytes -= old;
        bytes_ -= old;
        fit_bytes(n.get(), add);
        n->bytes += add;
        bytes_ += add;
        n->blocks = std::move(table);
      }
      Touch(*n);
      return Status::OK();
    }
    uint64_t unused = 0;
    PION_RETURN_IF_ERROR(RemoveLocked(n, DropReason::kDrop, &unused));
  }
  uint64_t unused = 0;
  PION_RETURN_IF_ERROR(EvictNamespacesLocked(
      nullptr, [&] { return 2 * (map_.size() + 1) <= std::max<uint64_t>(cfg_.max_sessions, 2); },
      &unused));
  fit_bytes(nullptr, TableBytes(table));
  auto n = std::make_shared<Namespace>(std::string(ns), incarnation, kv_dim, fmt);
  n->blocks = std::move(table);
  n->bytes = TableBytes(n->blocks);
  bytes_ += n->bytes;
  Touch(*n);
  map_.emplace(n->name, std::move(n));
  return Status::OK();
}

Status Store::ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                          uint64_t start, uint64_t count, std::span<const uint8_t> stored) {
  NsPtr n = Find(ns);
  if (!n || n->incarnation != incarnation) return Status::NotFound("namespace not present");
  if (layer >= kMaxLayers || count == 0 || start > kMaxTokens || count > kMaxTokens - start ||
      stored.size() != count * n->row_bytes)
    return Status::Corruption("store record does not match its namespace");
  Touch(*n);
  uint64_t unused = 0;
  return StoreEncoded(n, side, layer, start, count, stored, false, &unused);
}

void Store::ApplyDrop(std::string_view ns, uint64_t incarnation) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(ns);
  if (it == map_.end() || it->second->incarnation != incarnation) return;
  NsPtr n = it->second;
  uint64_t unused = 0;
  Status st = RemoveLocked(n, DropReason::kDrop, &unused);
  PION_CHECK(st.ok());
}

void Store::ApplyFlushAll() {
  std::lock_guard<std::mutex> l(mu_);
  if (observer_) observer_->OnFlushAll();
  for (auto& [name, n] : map_) n->dropped = true;
  map_.clear();
  ClearStringsLocked();
  bytes_ = 0;
}

void Store::SetLruStamp(std::string_view ns, uint64_t stamp) {
  NsPtr n = Find(ns);
  if (!n) return;
  n->stamp.store(stamp, std::memory_order_relaxed);
  uint64_t cur = lru_clock_.load(std::memory_order_relaxed);
  while (cur < stamp && !lru_clock_.compare_exchange_weak(cur, stamp)) {
  }
}

}  // namespace pion::store
