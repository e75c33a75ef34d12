// The store as persistence sees it (persist/records.h): an adapter that is
// the store's PersistHost (recovery applies records to it, snapshots capture
// from it) and turns the WAL's RecordLog into the store's MutationSink. The
// free functions are the customisation points persist finds by
// argument-dependent lookup, so Persistence(&store, ...), LoadSnapshot(...,
// &store, ...) and WriteSnapshot(..., store.CaptureSnapshot(...), ...) work
// without src/persist naming a store type.
//
// Thread-safety: as the Store; AttachLog before serving.
#pragma once

#include <memory>
#include <vector>

#include "persist/records.h"
#include "store/mutation.h"
#include "store/store.h"

namespace pion::store {

// The store's MutationSink onto a RecordLog (the WAL writer).
class LogSink final : public MutationSink {
 public:
  explicit LogSink(persist::RecordLog* log) : log_(log) {}
  Result<uint64_t> OnRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                              quant::Format fmt, const BlockTable* blocks) override;
  Result<uint64_t> OnRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                   quant::Format fmt, const BlockTable* blocks,
                                   std::string_view parent_ns,
                                   uint64_t parent_incarnation) override;
  Result<uint64_t> OnStore(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                           uint64_t start, uint64_t count,
                           std::span<const uint8_t> stored) override;
  Result<uint64_t> OnDrop(std::string_view ns, uint64_t incarnation, DropReason reason) override;
  Result<uint64_t> OnFlushAll() override;
  Status ReserveStore(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                      uint64_t start, uint64_t count, uint32_t row_bytes,
                      PendingRecord* out) override;
  Status ReserveRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                         quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                         PendingRecord* out) override;
  Status ReserveRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                              quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                              std::string_view parent_ns, uint64_t parent_incarnation,
                              PendingRecord* out) override;
  Status ReserveStrSet(std::string_view key, int64_t expire_at_ms, uint64_t value_len,
                       PendingRecord* out) override {
    return log_->ReserveStrSet(key, expire_at_ms, value_len, out);
  }
  Result<uint64_t> OnStrDel(std::string_view key, uint8_t reason) override {
    return log_->OnStrDel(key, reason);
  }
  Result<uint64_t> OnStrExpire(std::string_view key, int64_t expire_at_ms) override {
    return log_->OnStrExpire(key, expire_at_ms);
  }
  Result<uint64_t> OnStrRename(std::string_view src, std::string_view dst) override {
    return log_->OnStrRename(src, dst);
  }

 private:
  persist::RecordLog* log_;
};

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
  std::vector<persist::SnapshotString> TakeCapturedStrings() override;
  // persist::SnapshotSource
  std::vector<persist::SnapshotNamespace> CaptureSnapshot(const std::function<Status()>& at_barrier,
                                                          Status* barrier_status) override;
  // persist::PersistHost
  void AttachLog(persist::RecordLog* log) override;
  persist::HostCounts Counts() const override;

 private:
  Store* store_;
  std::unique_ptr<LogSink> sink_;
};

std::vector<persist::SnapshotNamespace> ToSnapshotNamespaces(const std::vector<NamespaceView>& v);
std::unique_ptr<persist::PersistHost> MakePersistHost(Store* store);
std::unique_ptr<persist::RecordSink> MakeRecordSink(Store* store);

}  // namespace pion::store
