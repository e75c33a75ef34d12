// Persistence glue: see persist_glue.h.
#include "server/persist_glue.h"

#include <algorithm>
#include <string>
#include <thread>

#include "base/log.h"
#include "server/commands/args.h"

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
                                  : std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  o.wal_preallocate_bytes = c.wal_preallocate_bytes;
  o.wal_recycle = c.wal_recycle;
  o.keep_freed_heap = std::move(keep_freed_heap);
  auto p = std::make_unique<persist::Persistence>(server.store(), o);
  persist::Persistence* pp = p.get();
  pp->SetAckCallback([&server](uint64_t lsn) { server.durability().NotifyDurable(lsn); });
  PersistenceHooks h;
  h.persistence = pp;
  h.save = [pp] { return pp->Save(""); };
  h.flush_on_exit = [pp] {
    Status s = pp->Close();
    if (!s.ok()) LOG_WARNING("flushing the WAL at exit failed: %s", s.ToString().c_str());
  };
  h.set_appendfsync = [pp](FsyncPolicy f) { pp->SetPolicy(ToSyncPolicy(f)); };
  h.info = [pp, &server](std::string* out) {
    if (server.loading()) return;
    persist::PersistStats s = pp->Stats();
    InfoField(out, "rdb_changes_since_last_save", s.wal_appended);
    // A KV.PREFIX.SAVE counts from the moment it is accepted (queued for the
    // background thread) until just before its reply.
    // A BGREWRITEAOF is the same snapshot, reported as Redis does: as an AOF
    // rewrite, not a BGSAVE.
    bool aofrw = server.aof_rewrite_running();
    bool saving = (s.save_in_progress || server.save_running()) && !aofrw;
    InfoField(out, "rdb_bgsave_in_progress", uint64_t{saving ? 1u : 0u});
    InfoField(out, "rdb_last_save_time", static_cast<uint64_t>(s.last_save_unix));
    InfoField(out, "rdb_last_bgsave_status", std::string(s.last_save_ok ? "ok" : "err"));
    InfoField(out, "rdb_saves", s.saves);
    InfoField(out, "rdb_last_save_seconds", std::to_string(s.last_save_seconds));
    InfoField(out, "rdb_snapshot_bytes", s.snapshot_bytes);
    InfoField(out, "aof_enabled", uint64_t{s.wal_enabled ? 1u : 0u});
    InfoField(out, "aof_rewrite_in_progress", uint64_t{aofrw ? 1u : 0u});
    InfoField(out, "aof_rewrite_scheduled", uint64_t{0});
    InfoField(out, "aof_current_size", s.wal_bytes);
    InfoField(out, "aof_last_write_status", std::string(s.wal_broken ? "err" : "ok"));
    InfoField(out, "wal_generation", s.wal_generation);
    InfoField(out, "wal_appended", s.wal_appended);
    InfoField(out, "wal_replayed", s.wal_replayed);
    InfoField(out, "wal_last_lsn", s.last_lsn);
    InfoField(out, "wal_durable_lsn", s.durable_lsn);
    InfoField(out, "auto_save_wal_bytes", s.auto_save_threshold);
    InfoField(out, "auto_save_failures", s.auto_save_failures);
    InfoField(out, "wal_resumes", s.wal_resumes);
    InfoField(out, "loading_last_seconds", std::to_string(s.recovery_seconds));
    InfoField(out, "loading_snapshot_mapped", uint64_t{s.snapshot_mapped ? 1u : 0u});
  };
  server.SetPersistenceHooks(std::move(h));
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
