// WalWriter implementation: see wal_writer.h and docs/wal_format.md §6.
#include "persist/wal_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "base/log.h"

namespace pion::persist {

WalWriter::WalWriter(Env* env, std::string dir, SyncPolicy policy)
    : env_(env), dir_(std::move(dir)), policy_(policy) {}

WalWriter::~WalWriter() {
  if (thread_.joinable()) {
    Status s = Commit();
    if (!s.ok()) LOG_WARNING("WAL: final sync failed: %s", s.ToString().c_str());
    {
      base::MutexLock l(&state_mu_);
      stop_ = true;
    }
    work_cv_.SignalAll();
    thread_.join();
  }
  // A recycled file still holding stale records past the last one: cut them,
  // so that a clean restart finds a clean end instead of a torn tail
  // (docs/wal_format.md §6). Nothing is in flight at destruction.
  base::MutexLock w(&write_mu_);
  if (cur_ && cur_->stale_end > end_ && broken_.ok()) {
    Status s = cur_->f->Truncate(end_);
    if (!s.ok())
      LOG_WARNING("WAL: cutting the recycled file's stale tail failed: %s", s.ToString().c_str());
  }
}

Status WalWriter::Create(const std::string& name, uint64_t generation, uint64_t first_lsn) {
  auto f = env_->NewWritableFile(JoinPath(dir_, name));
  if (!f.ok()) return f.status();
  uint8_t hdr[kWalHeaderSize];
  EncodeWalHeader({generation, first_lsn}, hdr);
  PION_RETURN_IF_ERROR((*f)->WriteAt(0, hdr));
  PION_RETURN_IF_ERROR((*f)->Sync());
  PION_RETURN_IF_ERROR(env_->SyncDir(dir_));
  Adopt(name, std::move(f).value(), generation, first_lsn, kWalHeaderSize);
  return Status::OK();
}

Status WalWriter::Continue(const std::string& name, uint64_t generation, uint64_t next_lsn,
                           uint64_t end) {
  auto f = env_->ReopenWritableFile(JoinPath(dir_, name));
  if (!f.ok()) return f.status();
  Adopt(name, std::move(f).value(), generation, next_lsn, end);
  return Status::OK();
}

void WalWriter::Adopt(const std::string& name, std::unique_ptr<WritableFile> f, uint64_t generation,
                      uint64_t next_lsn, uint64_t end) {
  base::MutexLock w(&write_mu_);
  base::MutexLock l(&state_mu_);
  cur_ = std::make_shared<File>(File{name, std::move(f)});
  sync_cur_ = cur_;
  active_name_ = name;
  generation_ = generation_seen_ = generation;
  next_lsn_ = next_lsn;
  end_ = end;
  written_lsn_ = durable_lsn_ = reserved_lsn_ = next_lsn - 1;
  bytes_ = end_;
  appended_ = 0;
}

void WalWriter::Start() {
  {
    base::MutexLock w(&write_mu_);
    PION_CHECK(cur_ != nullptr);
  }
  thread_ = std::thread([this] { SyncLoop(); });
}

Status WalWriter::BrokenLocked() const {
  if (broken_.ok()) return Status::OK();
  return Status::IOError(std::string("write-ahead log unavailable after an I/O error (") +
                         std::string(broken_.message()) +
                         "); writes refused until a snapshot (KV.PREFIX.SAVE) succeeds");
}

void WalWriter::DrainLocked() {
  while (in_flight_ != 0) drain_cv_.Wait(state_mu_);
}

Result<WalWriter::Reserved> WalWriter::ReserveBytes(RecordType t, std::vector<uint8_t> head,
                                                    uint64_t body_len) {
  PION_CHECK(head.size() >= kRecordHeaderSize);
  uint64_t len = head.size() - kRecordHeaderSize + body_len;
  if (len > kMaxPayload) return Status::InvalidArgument("record too large for the WAL");
  Reserved r;
  r.type = t;
  r.len = len;
  // The header slot and the prefix were framed outside write_mu_ (the CRC is
  // only known once the body is written, see Write).
  r.head = std::move(head);
  // Reserve the LSN and the byte range; nothing else happens under write_mu_.
  std::shared_ptr<File> prealloc;
  uint64_t pre_from = 0, pre_len = 0;
  {
    base::MutexLock w(&write_mu_);
    {
      base::MutexLock l(&state_mu_);
      PION_RETURN_IF_ERROR(BrokenLocked());
      r.lsn = next_lsn_++;
      r.off = end_;
      end_ += kRecordHeaderSize + len;
      r.gen = generation_;
      r.file = cur_;
      reserved_lsn_ = r.lsn;
      bytes_ = end_;
      ++in_flight_;
      // Less than half the preallocation left ahead: this append tops it up
      // (claimed here, done below with no lock held).
      File& f = *cur_;
      if (prealloc_bytes_ > 0 && f.prealloc_end != UINT64_MAX &&
          end_ + prealloc_bytes_ / 2 > f.prealloc_end) {
        pre_from = std::max(f.prealloc_end, r.off);
        f.prealloc_end = end_ + prealloc_bytes_;
        pre_len = f.prealloc_end - pre_from;
        prealloc = cur_;
      }
    }
    // In a recycled file the header slot holds stale bytes: zero it before any
    // later record can be reserved (still under write_mu_), so that until this
    // record's header is written it reads as a hole, as in a new file.
    if (r.off < r.file->stale_end) {
      static constexpr uint8_t kZeroHeader[kRecordHeaderSize] = {};
      r.stamp = r.file->f->WriteAt(r.off, kZeroHeader);
    }
  }
  if (prealloc) PreallocateAhead(prealloc, pre_from, pre_len);
  return r;
}

void WalWriter::PreallocateAhead(const std::shared_ptr<File>& file, uint64_t from, uint64_t len) {
  Status s = file->f->Preallocate(from, len);
  if (s.ok()) return;
  if (s.code() != Code::kNotSupported)
    LOG_WARNING("WAL %s: preallocation failed (%s); appending without it", file->name.c_str(),
                s.ToString().c_str());
  base::MutexLock w(&write_mu_);
  file->prealloc_end = UINT64_MAX;
}

Result<uint64_t> WalWriter::Write(Reserved& r, std::span<const uint8_t> body) {
  PION_CHECK(r.head.size() - kRecordHeaderSize + body.size() == r.len);
  // Frame (checksum over the body) and write with no lock held, concurrently
  // with other appends. Body first, header last: a record whose header is on
  // the disk had its body written first, and space whose header is still zero
  // reads as a hole (docs/wal_format.md §5).
  uint8_t* hdr = r.head.data();
  EncodeRecordHeader(hdr, r.type, r.lsn, static_cast<uint32_t>(r.len));
  std::span<const uint8_t> pieces[2] = {
      {r.head.data() + kRecordHeaderSize, r.head.size() - kRecordHeaderSize}, body};
  PutU32(hdr, RecordCrc(r.gen, hdr, pieces));
  Status s = r.stamp;
  if (s.ok() && !body.empty()) s = r.file->f->WriteAt(r.off + r.head.size(), body);
  if (s.ok()) s = r.file->f->WriteAt(r.off, r.head);
  return Complete(r.lsn, r.off, r.file, s);
}

Result<uint64_t> WalWriter::WriteParts(Reserved& r,
                                       std::span<const std::span<const uint8_t>> parts) {
  if (parts.size() == 1) return Write(r, parts[0]);
  size_t body = 0;
  for (const auto& p : parts) body += p.size();
  PION_CHECK(r.head.size() - kRecordHeaderSize + body == r.len);
  // As Write: the CRC runs over the prefix and every piece, pieces first, header last.
  uint8_t* hdr = r.head.data();
  EncodeRecordHeader(hdr, r.type, r.lsn, static_cast<uint32_t>(r.len));
  std::vector<std::span<const uint8_t>> pieces;
  pieces.reserve(parts.size() + 1);
  pieces.push_back({r.head.data() + kRecordHeaderSize, r.head.size() - kRecordHeaderSize});
  pieces.insert(pieces.end(), parts.begin(), parts.end());
  PutU32(hdr, RecordCrc(r.gen, hdr, pieces));
  Status s = r.stamp;
  uint64_t off = r.off + r.head.size();
  for (const auto& p : parts) {
    if (!s.ok()) break;
    if (!p.empty()) s = r.file->f->WriteAt(off, p);
    off += p.size();
  }
  if (s.ok()) s = r.file->f->WriteAt(r.off, r.head);
  return Complete(r.lsn, r.off, r.file, s);
}

Result<uint64_t> WalWriter::Complete(uint64_t lsn, uint64_t off, const std::shared_ptr<File>& file,
                                     const Status& s) {
  uint64_t ack = 0;
  bool wake = false;
  std::shared_ptr<File> truncate;
  uint64_t truncate_at = 0;
  Result<uint64_t> ret = lsn;
  {
    base::MutexLock l(&state_mu_);
    --in_flight_;
    ++appended_;
    if (!s.ok()) {
      LOG_WARNING("WAL append of lsn %llu failed: %s", static_cast<unsigned long long>(lsn),
                  s.ToString().c_str());
      if (broken_.ok()) broken_ = s;
      if (lsn < fail_lsn_) {
        fail_lsn_ = lsn;
        fail_off_ = off;
        fail_file_ = file;
      }
      durable_cv_.SignalAll();
      ret = Status::IOError(std::string("WAL append failed: ") + std::string(s.message()));
    } else if (lsn > fail_lsn_) {
      // Reserved before an earlier record failed: it is cut off below with
      // everything after the failed record, so the store must not apply it.
      ret = Status::IOError("WAL append refused: an earlier record failed to write (" +
                            std::string(broken_.message()) + ")");
    } else {
      max_ok_lsn_ = std::max(max_ok_lsn_, lsn);
      // Advance the contiguous mark over every record finished in order.
      if (lsn == written_lsn_ + 1) {
        written_lsn_ = lsn;
        while (!done_.empty() && done_.front() == written_lsn_ + 1) {
          std::pop_heap(done_.begin(), done_.end(), std::greater<>());
          done_.pop_back();
          ++written_lsn_;
        }
        if (policy_.load(std::memory_order_relaxed) == SyncPolicy::kAlways ||
            requested_lsn_ > durable_lsn_)
          wake = true;
        if (policy_.load(std::memory_order_relaxed) != SyncPolicy::kAlways) ack = written_lsn_;
      } else {
        done_.push_back(lsn);
        std::push_heap(done_.begin(), done_.end(), std::greater<>());
      }
    }
    if (fail_lsn_ != UINT64_MAX && in_flight_ == 0 && !fail_truncated_) {
      // Every append reserved before the failure has finished: cut the file at
      // the failed record so that no valid record follows a gap.
      fail_truncated_ = true;
      truncate = fail_file_;
      truncate_at = fail_off_;
    }
    if (in_flight_ == 0) drain_cv_.SignalAll();
  }
  if (truncate) {
    Status ts = truncate->f->Truncate(truncate_at);
    if (!ts.ok()) {
      LOG_WARNING("WAL: cutting off the failed record at offset %llu failed: %s",
                  static_cast<unsigned long long>(truncate_at), ts.ToString().c_str());
    } else {
      ResumeAfterCleanCut(truncate);
    }
  }
  if (wake) work_cv_.Signal();
  if (ack != 0 && on_ack_) on_ack_(ack);
  return ret;
}

void WalWriter::ResumeAfterCleanCut(const std::shared_ptr<File>& file) {
  base::MutexLock w(&write_mu_);
  base::MutexLock l(&state_mu_);
  // Clean iff the file ends at the failed record again, nothing is in flight,
  // no fsync failed, and no record after the failed one was reported written
  // (it could have been applied; then only a snapshot makes the log whole).
  if (broken_.ok() || sync_failed_ || fail_file_ != file || file != cur_ || in_flight_ != 0 ||
      max_ok_lsn_ >= fail_lsn_ || written_lsn_ + 1 != fail_lsn_)
    return;
  LOG_WARNING("WAL: failed record (lsn %llu) cut off at offset %llu of %s; appends resume",
              static_cast<unsigned long long>(fail_lsn_),
              static_cast<unsigned long long>(fail_off_), file->name.c_str());
  next_lsn_ = fail_lsn_;
  end_ = fail_off_;
  reserved_lsn_ = fail_lsn_ - 1;
  bytes_ = end_;
  done_.clear();
  ClearFailureLocked();
  ++resumes_;
}

void WalWriter::ClearFailureLocked() {
  broken_ = Status::OK();
  fail_lsn_ = UINT64_MAX;
  fail_off_ = 0;
  fail_file_.reset();
  fail_truncated_ = false;
  sync_failed_ = false;
}

Status WalWriter::Reserved::Into(WalWriter* w, Result<Reserved> r, PendingRecord* out) {
  if (!r.ok()) return r.status();
  // A reservation dropped unwritten (a bug) fails like a write error instead
  // of being counted in flight for ever.
  struct Held {
    WalWriter* w = nullptr;
    Reserved r;
    bool done = false;
    ~Held() {
      if (!done) (void)w->Complete(r.lsn, r.off, r.file, Status::IOError("record never written"));
    }
  };
  out->lsn = r->lsn;
  auto held = std::make_shared<Held>();  // built in place: a temporary would "abandon" it
  held->w = w;
  held->r = std::move(r).value();
  out->write = [held](std::span<const uint8_t> body) {
    held->done = true;
    return held->w->Write(held->r, body);
  };
  out->write_parts = [held](std::span<const std::span<const uint8_t>> parts) {
    held->done = true;
    return held->w->WriteParts(held->r, parts);
  };
  return Status::OK();
}

Result<uint64_t> WalWriter::Reserve(const Record& rec, PendingRecord* out) {
  // The header slot, then the payload's prefix encoded right after it: one
  // allocation for the fixed part of every common record, no copy.
  std::vector<uint8_t> head;
  head.reserve(kRecordHeaderSize + 128);
  head.resize(kRecordHeaderSize);
  const WalForm f = EncodeWal(rec, &head);
  auto r = ReserveBytes(f.type, std::move(head), f.body_len);
  if (!r.ok()) return r.status();
  if (out == nullptr) return Write(*r, f.body);
  const uint64_t lsn = r->lsn;
  PION_RETURN_IF_ERROR(Reserved::Into(this, std::move(r), out));
  return lsn;
}

void WalWriter::Position(uint64_t* generation, uint64_t* next_lsn) {
  base::MutexLock w(&write_mu_);
  *generation = generation_;
  *next_lsn = next_lsn_;
}

Status WalWriter::Rotate(const std::string& base, uint64_t* generation, uint64_t* first_lsn,
                         std::string* out_name) {
  base::MutexLock r(&rotate_mu_);
  base::MutexLock w(&write_mu_);
  bool healing;
  {
    // Appends reserved in the old file finish there first (at the store's
    // barrier there are none), so a rotated-out file is complete.
    base::MutexLock l(&state_mu_);
    DrainLocked();
    healing = !broken_.ok();
  }
  // A recycled file being retired must end at its last record: with a stale
  // tail, recovery would read it as torn and drop every newer file
  // (docs/wal_format.md §5).
  if (cur_->stale_end > end_) {
    Status ts = cur_->f->Truncate(end_);
    if (!ts.ok() && !healing) return ts;
    cur_->stale_end = end_;
  }
  uint64_t gen = generation_ + 1;
  const std::string name = base + "." + std::to_string(gen);
  const std::string path = JoinPath(dir_, name);
  // Recycle the spare when there is one (docs/wal_format.md §6): renamed to
  // the new name, its header overwritten, its stale records left in place.
  std::unique_ptr<WritableFile> f;
  uint64_t stale = 0;
  if (!spare_name_.empty() && spare_exists_) {
    spare_exists_ = false;
    const std::string spare = JoinPath(dir_, spare_name_);
    auto sz = env_->FileSize(spare);
    Status rs = sz.ok() ? env_->Rename(spare, path) : sz.status();
    if (rs.ok()) {
      auto rf = env_->ReopenWritableFile(path);
      if (rf.ok()) {
        f = std::move(rf).value();
        stale = *sz;
      } else {
        rs = rf.status();
        (void)env_->RemoveFile(path);
      }
    }
    if (!rs.ok())
      LOG_WARNING("WAL: recycling %s failed (%s); creating %s", spare.c_str(),
                  rs.ToString().c_str(), path.c_str());
  }
  if (!f) {
    auto nfile = env_->NewWritableFile(path);
    if (!nfile.ok()) return nfile.status();
    f = std::move(nfile).value();
  }
  uint8_t hdr[kWalHeaderSize];
  EncodeWalHeader({gen, next_lsn_}, hdr);
  Status s = f->WriteAt(0, hdr);
  // A broken WAL is not synced by the sync thread: the snapshot that heals it
  // (FinishRotation) needs the new file durable before it replaces anything.
  if (s.ok() && healing) s = f->Sync();
  if (s.ok() && healing) s = env_->SyncDir(dir_);
  if (!s.ok()) {
    (void)f->Close();
    // A recycled file goes back to being the spare; a new one is removed.
    if (stale != 0 && env_->Rename(path, JoinPath(dir_, spare_name_)).ok())
      spare_exists_ = true;
    else
      (void)env_->RemoveFile(path);
    return s;
  }
  auto nf = std::make_shared<File>(File{name, std::move(f)});
  if (stale > kWalHeaderSize) {
    nf->stale_end = stale;
    nf->prealloc_end = stale;  // its blocks are allocated already
  }
  rot_ = Rotation{cur_, generation_, end_, active_name_, next_lsn_, healing, true};
  {
    base::MutexLock l(&state_mu_);
    old_files_.push_back(cur_);
    cur_ = nf;
    sync_cur_ = nf;
    dir_dirty_ = !healing;
    generation_seen_ = gen;
    bytes_ = kWalHeaderSize;
    appended_ = 0;
    if (nf->stale_end != 0) ++recycled_;
  }
  generation_ = gen;
  end_ = kWalHeaderSize;
  active_name_ = name;
  *generation = gen;
  *first_lsn = next_lsn_;
  *out_name = name;
  return Status::OK();
}

bool WalWriter::RotationHeals() {
  base::MutexLock w(&write_mu_);
  return rot_.active && rot_.healing;
}

Status WalWriter::AbortRotation() {
  base::MutexLock r(&rotate_mu_);
  std::shared_ptr<File> dropped;
  {
    base::MutexLock w(&write_mu_);
    base::MutexLock l(&state_mu_);
    if (!rot_.active) return Status::OK();
    rot_.active = false;
    // Records went to the new file since the barrier: it is live, keep it
    // (the next successful save removes it).
    if (next_lsn_ != rot_.first_lsn || in_flight_ != 0 || cur_->name != active_name_)
      return Status::OK();
    dropped = cur_;
    cur_ = rot_.prev;
    sync_cur_ = cur_;
    auto it = std::find(old_files_.begin(), old_files_.end(), cur_);
    if (it != old_files_.end()) old_files_.erase(it);
    generation_ = generation_seen_ = rot_.prev_generation;
    end_ = bytes_ = rot_.prev_end;
    active_name_ = rot_.prev_name;
    dir_dirty_ = true;
  }
  // Not closed here: the sync thread may still hold it for a sync (closed with
  // its last reference). A recycled file goes back to being the spare.
  Status s;
  if (dropped->stale_end != 0 &&
      env_->Rename(JoinPath(dir_, dropped->name), JoinPath(dir_, spare_name_)).ok())
    spare_exists_ = true;
  else
    s = env_->RemoveFile(JoinPath(dir_, dropped->name));
  if (s.ok()) s = env_->SyncDir(dir_);
  return s;
}

Status WalWriter::FinishRotation(const std::string& final_name,
                                 const std::vector<std::string>& obsolete) {
  // File I/O here runs without write_mu_: appends go on meanwhile.
  base::MutexLock r(&rotate_mu_);
  std::shared_ptr<File> cur;
  std::string active;
  {
    base::MutexLock w(&write_mu_);
    cur = cur_;
    active = active_name_;
  }
  // Never let a rename make a file durable whose header is not.
  PION_RETURN_IF_ERROR(cur->f->Sync());
  // Recycling: the retired file (the one under final_name, else another
  // obsolete one) becomes the spare instead of being removed
  // (docs/wal_format.md §6).
  std::string kept;
  if (!spare_name_.empty()) {
    for (const auto& n : obsolete)
      if (n != active && (kept.empty() || n == final_name)) kept = n;
    if (!kept.empty() && !env_->FileExists(JoinPath(dir_, kept))) kept.clear();
    if (!kept.empty()) {
      Status ks = env_->Rename(JoinPath(dir_, kept), JoinPath(dir_, spare_name_));
      if (ks.ok()) {
        spare_exists_ = true;
      } else {
        LOG_WARNING("WAL: keeping %s as the spare failed: %s", kept.c_str(), ks.ToString().c_str());
        kept.clear();
      }
    }
  }
  if (active != final_name) {
    PION_RETURN_IF_ERROR(env_->Rename(JoinPath(dir_, active), JoinPath(dir_, final_name)));
    base::MutexLock w(&write_mu_);
    active_name_ = final_name;
    base::MutexLock l(&state_mu_);
    cur->name = final_name;
    // Later errors about this file name the file that exists.
    cur->f->Renamed(JoinPath(dir_, final_name));
  }
  for (const auto& n : obsolete)
    if (n != final_name && n != kept) (void)env_->RemoveFile(JoinPath(dir_, n));
  PION_RETURN_IF_ERROR(env_->SyncDir(dir_));
  uint64_t ack = 0;
  {
    base::MutexLock w(&write_mu_);
    bool heal = rot_.active && rot_.healing;
    rot_.active = false;
    if (heal) {
      // The snapshot holds every change the store applied, durably: the WAL
      // is whole again from the new generation on (nothing was appended to it
      // meanwhile: appends were refused while broken).
      base::MutexLock l(&state_mu_);
      LOG_NOTICE("WAL: snapshot durable, writes resume in %s (generation %llu)", final_name.c_str(),
                 static_cast<unsigned long long>(generation_));
      ClearFailureLocked();
      done_.clear();
      old_files_.clear();
      written_lsn_ = durable_lsn_ = reserved_lsn_ = next_lsn_ - 1;
      max_ok_lsn_ = written_lsn_;
      ack = durable_lsn_;
      ++resumes_;
      durable_cv_.SignalAll();
    }
  }
  // Replies held for records before the barrier are covered by the snapshot.
  if (ack != 0 && on_ack_) on_ack_(ack);
  return Status::OK();
}

uint64_t WalWriter::last_lsn() const {
  base::MutexLock l(&state_mu_);
  return written_lsn_;
}

uint64_t WalWriter::durable_lsn() const {
  base::MutexLock l(&state_mu_);
  return durable_lsn_;
}

Status WalWriter::WaitDurable(uint64_t lsn) {
  base::MutexLock l(&state_mu_);
  if (lsn > requested_lsn_ && policy_.load() != SyncPolicy::kAlways) {
    requested_lsn_ = lsn;
    work_cv_.Signal();
  }
  while (durable_lsn_ < lsn && broken_.ok() && !stop_) durable_cv_.Wait(state_mu_);
  if (durable_lsn_ >= lsn) return Status::OK();
  PION_RETURN_IF_ERROR(BrokenLocked());
  return Status::IOError("WAL closed");
}

uint64_t WalWriter::RequestSync() {
  base::MutexLock l(&state_mu_);
  if (reserved_lsn_ > requested_lsn_) requested_lsn_ = reserved_lsn_;
  work_cv_.Signal();
  return reserved_lsn_;
}

Status WalWriter::Commit() {
  uint64_t lsn = RequestSync();
  if (!thread_.joinable()) {
    // No sync thread (tests, tools): sync inline, once the appends in flight finished.
    base::MutexLock w(&write_mu_);
    base::MutexLock l(&state_mu_);
    DrainLocked();
    PION_RETURN_IF_ERROR(BrokenLocked());
    for (auto& f : old_files_) PION_RETURN_IF_ERROR(f->f->Sync());
    old_files_.clear();
    PION_RETURN_IF_ERROR(cur_->f->Sync());
    if (dir_dirty_) PION_RETURN_IF_ERROR(env_->SyncDir(dir_));
    dir_dirty_ = false;
    durable_lsn_ = written_lsn_;
    return Status::OK();
  }
  return WaitDurable(lsn);
}

void WalWriter::SetPolicy(SyncPolicy p) {
  policy_.store(p);
  work_cv_.Signal();
  // Replies held for a sync under `always` may go out at once now.
  if (p != SyncPolicy::kAlways && on_ack_) on_ack_(last_lsn());
}

void WalWriter::RecordSyncLocked(uint64_t us) {
  sync_us_ += us;
  size_t b = 0;
  while (b + 1 < kSyncHistBuckets && (uint64_t{1} << b) < us) ++b;
  ++sync_hist_[b];
}

WalStats WalWriter::Stats() const {
  base::MutexLock l(&state_mu_);
  WalStats s;
  s.generation = generation_seen_;
  s.bytes = bytes_;
  s.appended = appended_;
  s.last_lsn = written_lsn_;
  s.durable_lsn = durable_lsn_;
  s.syncs = syncs_;
  s.sync_us = sync_us_;
  for (size_t i = 0; i < kSyncHistBuckets; ++i) s.sync_hist[i] = sync_hist_[i];
  s.broken = !broken_.ok();
  s.resumes = resumes_;
  s.recycled = recycled_;
  return s;
}

void WalWriter::SyncLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  base::MutexLock l(&state_mu_);
  for (;;) {
    auto pending = [&]() REQUIRES(state_mu_) {
      if (!broken_.ok()) return false;
      // Only ever sync up to the contiguous written mark; a request for LSNs
      // still being written is served once the mark reaches them.
      if (requested_lsn_ > durable_lsn_ && written_lsn_ > durable_lsn_) return true;
      if (dir_dirty_ && policy_.load() == SyncPolicy::kAlways) return true;
      if (written_lsn_ > durable_lsn_) {
        SyncPolicy p = policy_.load();
        if (p == SyncPolicy::kAlways) return true;
        if (p == SyncPolicy::kEverySec && Clock::now() >= next_tick) return true;
      }
      return false;
    };
    while (!stop_ && !pending()) {
      if (policy_.load() == SyncPolicy::kEverySec) {
        work_cv_.WaitUntil(state_mu_, next_tick);
        if (Clock::now() >= next_tick && written_lsn_ <= durable_lsn_ && !dir_dirty_)
          next_tick = Clock::now() + std::chrono::seconds(1);
      } else {
        work_cv_.Wait(state_mu_);
      }
    }
    if (stop_ && !pending()) return;
    uint64_t target = written_lsn_;
    std::vector<std::shared_ptr<File>> old = old_files_;
    std::shared_ptr<File> cur = sync_cur_;
    bool dir = dir_dirty_;
    dir_dirty_ = false;
    l.Unlock();
    Status s;
    auto sync_start = Clock::now();
    for (auto& f : old)
      if (s.ok()) s = f->f->Sync();
    if (s.ok()) s = cur->f->Sync();
    if (s.ok() && dir) s = env_->SyncDir(dir_);
    uint64_t sync_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sync_start).count());
    l.Lock();
    ++syncs_;
    RecordSyncLocked(sync_us);
    next_tick = Clock::now() + std::chrono::seconds(1);
    if (!s.ok()) {
      LOG_WARNING("WAL fsync failed, refusing writes until a snapshot succeeds: %s",
                  s.ToString().c_str());
      broken_ = s;
      sync_failed_ = true;
      durable_cv_.SignalAll();
      continue;
    }
    // Closed files synced above are no longer needed (a rotation may have added more).
    // (A heal or an undone rotation may have changed the list meanwhile: remove
    // exactly the files synced.)
    for (const auto& f : old) {
      auto it = std::find(old_files_.begin(), old_files_.end(), f);
      if (it != old_files_.end()) old_files_.erase(it);
    }
    if (target > durable_lsn_) durable_lsn_ = target;
    uint64_t d = durable_lsn_;
    durable_cv_.SignalAll();
    if (on_ack_) {
      l.Unlock();
      on_ack_(d);
      l.Lock();
    }
  }
}

}  // namespace pion::persist
