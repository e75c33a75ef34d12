// SaveScheduler (save_scheduler.h): background snapshots and Redis's save
// points (config `save`, docs/operations.md "Persistence for Redis users"):
// BGSAVE, BGREWRITEAOF and a due save point all queue pion's one snapshot (the data set written
// out, then the WAL truncated to what follows it) on the background thread. Redis forks a child for
// them; INFO's total_forks counts them here.
#include "server/save_scheduler.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "persist/persistence.h"

namespace pion::server {

namespace {
// Redis's CONFIG_BGSAVE_RETRY_DELAY: a save point after a failed snapshot
// waits this long before trying again.
constexpr int64_t kSavePointRetrySeconds = 5;
}  // namespace

BgSaveStart SaveScheduler::StartBackgroundSave(bool aof_rewrite) {
  persist::Persistence* p = persistence_;
  if (p == nullptr) return BgSaveStart::kNoPersistence;
  if (!TryBeginSave()) return BgSaveStart::kBusy;
  NoteBackgroundSave(aof_rewrite);
  bool queued = background_->Post([this, p] {
    Status st = p->Save(std::string());
    EndSave();
    if (!st.ok()) LOG_WARNING("Background save failed: %s", std::string(st.message()).c_str());
  });
  if (!queued) {
    EndSave();
    return BgSaveStart::kShuttingDown;
  }
  return BgSaveStart::kStarted;
}

void SaveScheduler::SetSavePoints(SavePoints points) {
  base::MutexLock lk(&mu_);
  points_ = std::move(points);
}

void SaveScheduler::SavePointsCron() {
  persist::Persistence* p = persistence_;
  if (p == nullptr || save_running()) return;
  SavePoints points;
  {
    base::MutexLock lk(&mu_);
    points = points_;
  }
  if (points.empty()) return;
  persist::PersistStats s = p->Stats();
  int64_t now = UnixSeconds();
  // The last snapshot (any: SAVE, BGSAVE, the WAL's own compaction) resets
  // the count of changes and the clock, as Redis's `dirty` and `lastsave`.
  int64_t since = now - std::max(s.last_save_unix, started_unix_);
  bool may_retry =
      !save_point_failed_.load(std::memory_order_relaxed) ||
      now - save_point_try_unix_.load(std::memory_order_relaxed) > kSavePointRetrySeconds;
  if (!may_retry) return;
  for (const auto& [secs, changes] : points) {
    if (s.wal_appended < changes || since <= static_cast<int64_t>(secs)) continue;
    LOG_NOTICE("%llu changes in %llu seconds. Saving...", static_cast<unsigned long long>(changes),
               static_cast<unsigned long long>(secs));
    if (!TryBeginSave()) return;
    NoteBackgroundSave(false);
    save_point_try_unix_.store(now, std::memory_order_relaxed);
    bool queued = background_->Post([this, p] {
      Status st = p->Save(std::string());
      save_point_failed_.store(!st.ok(), std::memory_order_relaxed);
      EndSave();
      if (!st.ok())
        LOG_WARNING("Background save (save point) failed: %s", std::string(st.message()).c_str());
    });
    if (!queued) EndSave();
    return;
  }
}

void SaveScheduler::SaveAfterFlushAll() {
  persist::Persistence* p = persistence_;
  if (p == nullptr) return;
  {
    base::MutexLock lk(&mu_);
    if (points_.empty()) return;
  }
  // With a snapshot already queued or running, this one waits for it (Redis
  // stops its child and saves): the count of changes must read 0 after.
  bool mine = TryBeginSave();
  Status st = p->Save(std::string());
  if (mine) EndSave();
  if (!st.ok()) LOG_WARNING("FLUSHALL's snapshot failed: %s", std::string(st.message()).c_str());
}

Status SaveScheduler::SaveForShutdown() {
  if (persistence_ == nullptr) return Status::OK();
  return persistence_->Save("");
}

}  // namespace pion::server
