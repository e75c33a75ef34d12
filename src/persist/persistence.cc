// Persistence: see persistence.h.
#include "persist/persistence.h"

#include <algorithm>
#include <chrono>

#include "base/atomic_raise.h"
#include "base/clock.h"
#include "base/log.h"
#include "persist/snapshot.h"

namespace pion::persist {

Persistence::Persistence(std::unique_ptr<PersistHost> host, PersistOptions opt)
    : host_(std::move(host)), opt_(std::move(opt)), env_(opt_.env ? opt_.env : PosixEnv()) {}

Persistence::~Persistence() { (void)Close(); }

Status Persistence::Recover() {
  PION_RETURN_IF_ERROR(env_->CreateDir(opt_.dir));
  RecoveryResult r;
  RecoveryOptions ro;
  ro.wal_repair = opt_.wal_repair;
  ro.keep_freed_heap = opt_.keep_freed_heap;
  ro.map_snapshot = opt_.map_snapshot;
  ro.snapshot_verify_threads = opt_.snapshot_verify_threads;
  PION_RETURN_IF_ERROR(persist::Recover(env_, opt_.dir, host_.get(), ro, &r));
  auto wal = std::make_unique<WalWriter>(env_, opt_.dir, opt_.policy);
  wal->SetPreallocateBytes(opt_.wal_preallocate_bytes);
  if (on_ack_) {
    wal->SetAckCallback([this](uint64_t lsn) {
      if (base::AtomicRaise(&acked_, lsn)) on_ack_(acked_.load());
    });
  }
  if (r.continue_existing) {
    PION_RETURN_IF_ERROR(wal->Continue(r.active_name, r.generation, r.next_lsn, r.end));
  } else {
    PION_RETURN_IF_ERROR(wal->Create(r.active_name, r.generation, r.next_lsn));
    r.live_wal_names.push_back(r.active_name);
  }
  const std::string spare = JoinPath(opt_.dir, kWalSpareName);
  if (opt_.wal_recycle) {
    wal->EnableRecycling(kWalSpareName, env_->FileExists(spare));
  } else if (env_->FileExists(spare)) {
    // Never read (not a WAL name): removing it only frees its disk space.
    Status rs = env_->RemoveFile(spare);
    if (!rs.ok()) LOG_WARNING("WAL: removing %s failed: %s", spare.c_str(), rs.ToString().c_str());
  }
  wal->Start();
  wal_ = std::move(wal);
  host_->AttachLog(wal_.get());
  {
    base::MutexLock l(&save_mu_);
    live_wal_names_ = r.live_wal_names;
  }
  {
    base::MutexLock l(&mu_);
    stats_.wal_replayed = r.wal_replayed;
    stats_.recovery_seconds = r.seconds;
    HostCounts c = host_->Counts();
    stats_.loaded_namespaces = c.namespaces;
    stats_.loaded_rows = c.rows;
    if (r.snapshot_loaded) {
      stats_.snapshot_bytes = r.snapshot.file_bytes;
      stats_.snapshot_mapped = r.snapshot.mapped;
      stats_.last_save_unix = static_cast<int64_t>(r.snapshot.header.created_unix);
    }
  }
  HostCounts st = host_->Counts();
  LOG_NOTICE(
      "recovery done: %llu namespaces (%llu sessions), %llu rows, %llu bytes in %.3f s (%.0f "
      "MB/s); "
      "%llu WAL records replayed; WAL %s, generation %llu, next lsn %llu",
      static_cast<unsigned long long>(st.namespaces), static_cast<unsigned long long>(st.sessions),
      static_cast<unsigned long long>(st.rows), static_cast<unsigned long long>(st.bytes),
      r.seconds, r.seconds > 0 ? static_cast<double>(st.bytes) / 1e6 / r.seconds : 0.0,
      static_cast<unsigned long long>(r.wal_replayed), r.active_name.c_str(),
      static_cast<unsigned long long>(r.generation), static_cast<unsigned long long>(r.next_lsn));
  if (opt_.background) bg_ = std::thread([this] { BackgroundLoop(); });
  return Status::OK();
}

Status Persistence::ValidateSavePath(std::string_view path) {
  static const Status kBad = Status::InvalidArgument(
      "KV.PREFIX.SAVE: path must be relative to the data directory (no leading '/', no '..', no "
      "control bytes)");
  if (path.empty() || path[0] == '/' || path[0] == '~') return kBad;
  for (unsigned char c : path)
    if (c < 32 || c == 127) return kBad;
  size_t i = 0;
  std::string_view last;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view comp = path.substr(i, j - i);
    if (comp == "..") return kBad;
    last = comp;
    i = j + 1;
  }
  if (last.empty() || last == ".") return kBad;
  if (last.substr(0, std::string_view(kWalName).size()) == kWalName ||
      (last.size() > 4 && last.substr(last.size() - 4) == ".tmp"))
    return Status::InvalidArgument("KV.PREFIX.SAVE: path would overwrite a WAL or temporary file");
  return Status::OK();
}

Status Persistence::Save(std::string_view path) {
  if (!wal_) return Status::NotSupported("persistence is not enabled");
  if (!path.empty()) PION_RETURN_IF_ERROR(ValidateSavePath(path));
  base::MutexLock l(&save_mu_);
  return RunSaveLocked(path);
}

Status Persistence::RunSaveLocked(std::string_view path) {
  saving_ = true;
  Status s = SaveLocked(path);
  saving_ = false;
  base::MutexLock m(&mu_);
  stats_.last_save_ok = s.ok();
  return s;
}

Status Persistence::SaveLocked(std::string_view path) {
  uint64_t t0 = MonotonicNs();
  const bool compact = path.empty() || path == kSnapshotName;
  const std::string target =
      JoinPath(opt_.dir, compact ? std::string(kSnapshotName) : std::string(path));
  SnapHeader hdr;
  Status barrier;
  std::string new_name;
  std::vector<SnapshotNamespace> views;
  if (compact) {
    views = host_->CaptureSnapshot(
        [&]() -> Status {
          return wal_->Rotate(kWalName, &hdr.generation, &hdr.next_lsn, &new_name);
        },
        &barrier);
  } else {
    views = host_->CaptureSnapshot(
        [&]() -> Status {
          wal_->Position(&hdr.generation, &hdr.next_lsn);
          return Status::OK();
        },
        &barrier);
  }
  std::vector<SnapshotString> strings = host_->TakeCapturedStrings();
  if (!barrier.ok()) return barrier;
  // A failed save removes the WAL file its barrier created when nothing was
  // logged to it since (else it holds records and stays live).
  auto undo_rotation = [&]() REQUIRES(save_mu_) {
    if (!compact) return;
    Status u = wal_->AbortRotation();
    if (!u.ok())
      LOG_WARNING("SAVE: removing %s failed: %s", new_name.c_str(), u.ToString().c_str());
    if (wal_->active_name() != new_name)
      live_wal_names_.erase(std::remove(live_wal_names_.begin(), live_wal_names_.end(), new_name),
                            live_wal_names_.end());
  };
  if (compact) {
    live_wal_names_.push_back(new_name);
    // Make the new WAL file (its header and directory entry) and everything the
    // snapshot holds durable before the snapshot can replace anything. (When
    // this snapshot heals a broken WAL, Rotate synced the new file itself and
    // the snapshot is what makes the rest durable.)
    if (!wal_->RotationHeals()) {
      Status c = wal_->Commit();
      if (!c.ok()) {
        views.clear();
        undo_rotation();
        return c;
      }
    }
  }
  hdr.created_unix = static_cast<uint64_t>(UnixSeconds());
  hdr.namespace_count = views.size();
  for (const auto& v : views) hdr.lru_clock = std::max(hdr.lru_clock, v.lru_stamp);
  for (const auto& k : strings) hdr.lru_clock = std::max(hdr.lru_clock, k.lru_stamp);
  SnapshotStats st;
  // The default path references values in the disk tier instead of copying
  // them (docs/snapshot_format.md §6): their extents stay allocated until the
  // next such snapshot is in place, and the tier is synced before the rename.
  SnapshotWriteOptions wo;
  std::vector<std::shared_ptr<const void>> tier_pins;
  if (compact) {
    wo.tier_refs = true;
    for (const SnapshotString& k : strings)
      if (k.in_tier) tier_pins.push_back(k.tier_pin);
    for (const SnapshotNamespace& v : views)
      if (v.in_tier) tier_pins.push_back(v.tier_pin);
    if (!tier_pins.empty()) wo.before_rename = [this] { return host_->SyncTierForSnapshot(); };
  }
  Status s = WriteSnapshot(env_, target, hdr, views, &st, &strings, &wo);
  views.clear();  // unpin the chunks
  strings.clear();
  if (s.ok() && compact) host_->SnapshotCommitted(std::move(tier_pins));
  tier_pins.clear();
  if (!s.ok()) {
    LOG_WARNING("SAVE to %s failed: %s (previous snapshot and WAL kept)", target.c_str(),
                s.ToString().c_str());
    undo_rotation();
    return Status::IOError(std::string("KV.PREFIX.SAVE failed: ") + std::string(s.message()));
  }
  if (compact) {
    std::vector<std::string> obsolete;
    for (const auto& n : live_wal_names_)
      if (n != wal_->active_name()) obsolete.push_back(n);
    s = wal_->FinishRotation(kWalName, obsolete);
    if (!s.ok()) {
      // The snapshot is in place; the WAL files still replay correctly (recovery
      // skips generations below the snapshot's). Report the failure.
      LOG_WARNING("SAVE: WAL switch after the snapshot failed: %s", s.ToString().c_str());
      return s;
    }
    live_wal_names_.assign(1, kWalName);
  }
  double secs = static_cast<double>(MonotonicNs() - t0) / 1e9;
  LOG_NOTICE(
      "SAVE %s: %llu namespaces (%llu in the disk tier), %llu rows (and %llu in the disk tier), "
      "%llu strings (%llu in the disk tier), %llu bytes in %.3f s (%.0f MB/s)",
      target.c_str(), static_cast<unsigned long long>(st.namespaces),
      static_cast<unsigned long long>(st.ns_tier_refs), static_cast<unsigned long long>(st.rows),
      static_cast<unsigned long long>(st.tier_rows), static_cast<unsigned long long>(st.strings),
      static_cast<unsigned long long>(st.tier_refs), static_cast<unsigned long long>(st.file_bytes),
      secs, secs > 0 ? static_cast<double>(st.file_bytes) / 1e6 / secs : 0.0);
  base::MutexLock l(&mu_);
  stats_.last_save_unix = UnixSeconds();
  stats_.last_save_seconds = secs;
  ++stats_.saves;
  if (compact) stats_.snapshot_bytes = st.file_bytes;
  return Status::OK();
}

Status Persistence::Commit() {
  if (!wal_) return Status::NotSupported("persistence is not enabled");
  return wal_->Commit();
}

void Persistence::SetPolicy(SyncPolicy p) {
  opt_.policy = p;
  if (wal_) wal_->SetPolicy(p);
}

uint64_t Persistence::AutoSaveThreshold() const {
  if (opt_.auto_save_wal_bytes != 0) return opt_.auto_save_wal_bytes;
  base::MutexLock l(&mu_);
  return std::max<uint64_t>(64ull << 20, stats_.snapshot_bytes);
}

uint64_t Persistence::AutoSaveBackoffMs(uint64_t failures) const {
  if (failures == 0) return 0;
  uint64_t d = std::max<uint64_t>(opt_.auto_save_retry_min_ms, 1);
  for (uint64_t i = 1; i < failures && d < opt_.auto_save_retry_max_ms; ++i) d *= 2;
  return std::min(d, std::max(opt_.auto_save_retry_max_ms, opt_.auto_save_retry_min_ms));
}

bool Persistence::AutoSaveTick(uint64_t now_ms) {
  if (!wal_) return false;
  WalStats ws = wal_->Stats();
  // A broken WAL is healed by a snapshot (docs/wal_format.md §6); a long one
  // is compacted.
  if (!ws.broken && ws.bytes <= AutoSaveThreshold()) return false;
  {
    base::MutexLock l(&mu_);
    if (now_ms < next_auto_save_ms_) return false;
  }
  Status s;
  {
    // A SAVE may have held save_mu_ since the check above and compacted the
    // log: decide again under it, or the log would be snapshotted twice (and a
    // client that saw its SAVE answered would find another one in progress).
    base::MutexLock sl(&save_mu_);
    ws = wal_->Stats();
    if (!ws.broken && ws.bytes <= AutoSaveThreshold()) return false;
    if (ws.broken) {
      LOG_NOTICE("WAL refuses writes after an I/O error: snapshot to resume");
    } else {
      LOG_NOTICE("WAL is %llu bytes (> %llu): automatic snapshot",
                 static_cast<unsigned long long>(ws.bytes),
                 static_cast<unsigned long long>(AutoSaveThreshold()));
    }
    s = RunSaveLocked("");
  }
  base::MutexLock l(&mu_);
  ++stats_.auto_save_attempts;
  if (s.ok()) {
    stats_.auto_save_failures = 0;
    next_auto_save_ms_ = 0;
  } else {
    // Back off on repeated failure (a full disk): min, 2x min, ... up to max.
    uint64_t d = AutoSaveBackoffMs(++stats_.auto_save_failures);
    next_auto_save_ms_ = now_ms + d;
    LOG_WARNING("automatic snapshot failed (%llu in a row), next try in %.1f s: %s",
                static_cast<unsigned long long>(stats_.auto_save_failures),
                static_cast<double>(d) / 1000.0, s.ToString().c_str());
  }
  return true;
}

void Persistence::BackgroundLoop() {
  base::MutexLock l(&mu_);
  while (!stop_) {
    cv_.WaitUntil(mu_, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (stop_) break;
    l.Unlock();
    (void)AutoSaveTick(MonotonicNs() / 1000000);
    l.Lock();
  }
}

Status Persistence::Close() {
  {
    base::MutexLock l(&mu_);
    if (closed_) return Status::OK();
    closed_ = true;
    stop_ = true;
  }
  cv_.SignalAll();
  if (bg_.joinable()) bg_.join();
  Status s;
  if (wal_) {
    s = wal_->Commit();
    if (s.ok())
      LOG_NOTICE("WAL synced (lsn %llu)", static_cast<unsigned long long>(wal_->durable_lsn()));
  }
  return s;
}

PersistStats Persistence::Stats() const {
  PersistStats s;
  {
    base::MutexLock l(&mu_);
    s = stats_;
  }
  s.save_in_progress = saving_.load();
  s.auto_save_threshold = AutoSaveThreshold();
  if (wal_) {
    WalStats w = wal_->Stats();
    s.wal_enabled = !w.broken;
    s.wal_bytes = w.bytes;
    s.wal_appended = w.appended;
    s.wal_generation = w.generation;
    s.last_lsn = w.last_lsn;
    s.durable_lsn = w.durable_lsn;
    s.wal_broken = w.broken;
    s.wal_resumes = w.resumes;
    s.wal_syncs = w.syncs;
    s.wal_sync_us = w.sync_us;
    for (size_t i = 0; i < kSyncHistBuckets; ++i) s.wal_sync_hist[i] = w.sync_hist[i];
  }
  return s;
}

}  // namespace pion::persist
