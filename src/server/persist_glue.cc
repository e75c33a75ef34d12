// Persistence glue: see persist_glue.h.
#include "server/persist_glue.h"

#include <algorithm>

#include "base/cpu.h"

namespace pion::server {

persist::SyncPolicy ToSyncPolicy(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::kAlways:
      return persist::SyncPolicy::kAlways;
    case FsyncPolicy::kEverySec:
      return persist::SyncPolicy::kEverySec;
    case FsyncPolicy::kNo:
      return persist::SyncPolicy::kNo;
  }
  return persist::SyncPolicy::kEverySec;
}

std::unique_ptr<persist::Persistence> SetUpPersistence(
    Server& server, std::function<void(uint64_t)> keep_freed_heap) {
  if (server.store() == nullptr || !server.config().appendonly) return nullptr;
  const Config& c = server.config();
  persist::PersistOptions o;
  o.dir = c.dir;
  o.policy = ToSyncPolicy(c.appendfsync);
  o.auto_save_wal_bytes = c.auto_save_wal_bytes;
  o.auto_save_retry_min_ms = c.auto_save_retry_min * 1000;
  o.auto_save_retry_max_ms = c.auto_save_retry_max * 1000;
  o.wal_repair = c.wal_repair;
  o.map_snapshot = c.snapshot_mmap;
  o.snapshot_verify_threads = c.snapshot_verify_threads != 0
                                  ? static_cast<uint32_t>(c.snapshot_verify_threads)
                                  : std::min(8u, CoreCount());
  o.wal_preallocate_bytes = c.wal_preallocate_bytes;
  o.wal_recycle = c.wal_recycle;
  o.keep_freed_heap = std::move(keep_freed_heap);
  auto p = std::make_unique<persist::Persistence>(server.store(), o);
  persist::Persistence* pp = p.get();
  pp->SetAckCallback([&server](uint64_t lsn) { server.durability().NotifyDurable(lsn); });
  server.SetPersistence(pp);
  server.set_loading(true);
  return p;
}

Status RecoverPersistence(Server& server, persist::Persistence* p,
                          const std::function<void()>& before_serving) {
  if (p == nullptr) return Status::OK();
  Status s = p->Recover();
  if (s.ok()) {
    if (before_serving) before_serving();
    server.set_loading(false);
  }
  return s;
}

}  // namespace pion::server
