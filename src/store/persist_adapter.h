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

  // persist::RecordSink: each kind to the store's recovery API (store.h).
  Status Apply(const persist::Record& r) override;
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
