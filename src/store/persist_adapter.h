// The store as persistence sees it (persist/records.h): an adapter that is
// the store's PersistHost (recovery applies records to it, snapshots capture
// from it; the WAL writer it is given becomes the store's MutationSink as is).
// The free functions are the customisation points persist finds by
// argument-dependent lookup, so Persistence(&store, ...) and LoadSnapshot(...,
// &store, ...) work without src/persist naming a store type. The store already
// speaks persist's record types, so nothing here converts data.
//
// Thread-safety: as the Store; AttachLog before serving.
#pragma once

#include <memory>
#include <vector>

#include "persist/records.h"
#include "store/store.h"

namespace pion::store {

class StorePersistHost final : public persist::PersistHost {
 public:
  explicit StorePersistHost(Store* store) : store_(store) {}
  ~StorePersistHost() override = default;

  // persist::RecordSink
  Status ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                       quant::Format fmt, const persist::BlockRecord* blocks) override;
  Status ApplyRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                            quant::Format fmt, const persist::BlockRecord* blocks,
                            std::string_view parent_ns, uint64_t parent_incarnation) override;
  Status ApplyStored(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                     uint64_t start, uint64_t count, std::span<const uint8_t> stored) override;
  // Keeps whole chunks of the rows by reference (Store::ApplyStored with a backing).
  Status ApplyStoredMapped(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                           uint64_t start, uint64_t count, std::span<const uint8_t> stored,
                           const std::shared_ptr<const void>& backing) override {
    return store_->ApplyStored(ns, incarnation, side, layer, start, count, stored, &backing);
  }
  void ApplyDrop(std::string_view ns, uint64_t incarnation) override;
  void ApplyFlushAll() override;
  void SetLruStamp(std::string_view ns, uint64_t stamp) override;
  void ApplyStrSet(std::string_view key, int64_t expire_at_ms, uint64_t lru_stamp,
                   std::span<const uint8_t> value) override {
    store_->ApplyStrSet(key, expire_at_ms, lru_stamp, value);
  }
  void ApplyStrDel(std::string_view key) override { store_->ApplyStrDel(key); }
  void ApplyStrExpire(std::string_view key, int64_t expire_at_ms) override {
    store_->ApplyStrExpire(key, expire_at_ms);
  }
  void ApplyStrRename(std::string_view src, std::string_view dst) override {
    store_->ApplyStrRename(src, dst);
  }
  void ApplyStrPatch(std::string_view key, int64_t expire_at_ms, uint64_t offset,
                     std::span<const uint8_t> bytes, bool truncate) override {
    store_->ApplyStrPatch(key, expire_at_ms, offset, bytes, truncate);
  }
  void ApplyStrChain(const persist::StrChainRecord& r) override { store_->ApplyStrChain(r); }
  void ApplyStrBlock(const persist::StrBlockRecord& r) override { store_->ApplyStrBlock(r); }
  void ApplyStrQuant(const persist::StrQuantRecord& r) override { store_->ApplyStrQuant(r); }
  void ApplyStrTier(const persist::StrTierRecord& r) override { store_->ApplyStrTier(r); }
  void ApplyNamespaceTier(const persist::NsTierRecord& r) override {
    store_->ApplyNamespaceTier(r);
  }
  // persist::SnapshotSource
  std::vector<persist::SnapshotString> TakeCapturedStrings() override {
    return store_->TakeCapturedStrings();
  }
  std::vector<persist::SnapshotNamespace> CaptureSnapshot(const std::function<Status()>& at_barrier,
                                                          Status* barrier_status) override {
    return store_->CaptureSnapshot(at_barrier, barrier_status);
  }
  Status SyncTierForSnapshot() override { return store_->SyncTierForSnapshot(); }
  void SnapshotCommitted(std::vector<std::shared_ptr<const void>> tier_pins) override {
    store_->SetSnapshotTierPins(std::move(tier_pins));
  }
  // persist::PersistHost
  void AttachLog(persist::MutationSink* log) override { store_->SetSink(log); }
  persist::HostCounts Counts() const override;

 private:
  Store* store_;
};

std::unique_ptr<persist::PersistHost> MakePersistHost(Store* store);
std::unique_ptr<persist::RecordSink> MakeRecordSink(Store* store);

}  // namespace pion::store
