// Recovery: see recovery.h and docs/wal_format.md §5.
#include "persist/recovery.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "persist/wal_reader.h"

namespace pion::persist {
namespace {

struct WalFile {
  std::string name;
  WalHeader header;
};

Status ApplyRecord(RecordSink* sink, const WalRecord& rec, bool* applied) {
  Record r;
  DecodeScratch scratch;
  PION_RETURN_IF_ERROR(DecodeWal(rec.type, rec.payload, &r, &scratch));
  Status s = sink->Apply(r);
  // Skipped: its namespace is absent or of another incarnation.
  *applied = s.code() != Code::kNotFound;
  return *applied ? s : Status::OK();
}

// Loading a snapshot allocates its whole size in store chunks from the main
// malloc arena, and each first touch of a 4 KiB page is a page fault. Growing
// the arena once and populating it in the kernel (MADV_POPULATE_WRITE), then
// handing it back to malloc, removes the guest's page-fault cost: a 537 MB load
// went from 3.6 s to 2.1 s here. What remains is the virtual machine's own
// first-write cost (~350 MB/s measured with memset on fresh pages). Best
// effort: any failure just leaves the ordinary path.
void PrefaultHeap(uint64_t bytes, const std::function<void(uint64_t)>& keep_freed_heap) {
  constexpr size_t kBlock = 16u << 20;  // below the mmap threshold: from the heap
  if (bytes < (64u << 20)) return;
  // The freed blocks must stay in the arena (not be trimmed back to the OS).
  if (keep_freed_heap) keep_freed_heap(bytes);
  std::vector<void*> blocks;
  for (uint64_t done = 0; done < bytes; done += kBlock) {
    void* p = std::malloc(kBlock);
    if (p == nullptr) break;
    blocks.push_back(p);
    uintptr_t a = (reinterpret_cast<uintptr_t>(p) + 4095) & ~uintptr_t{4095};
    if (::madvise(reinterpret_cast<void*>(a), kBlock - 8192, MADV_POPULATE_WRITE) != 0) break;
  }
  for (void* p : blocks) std::free(p);
}

}  // namespace

bool IsWalFileName(std::string_view name) {
  std::string_view base = kWalName;
  if (name == base) return true;
  if (name.size() <= base.size() + 1 || name.substr(0, base.size()) != base ||
      name[base.size()] != '.')
    return false;
  for (char c : name.substr(base.size() + 1))
    if (c < '0' || c > '9') return false;
  return true;
}

Status Recover(Env* env, const std::string& dir, RecordSink* sink, const RecoveryOptions& opt,
               RecoveryResult* out) {
  uint64_t t0 = MonotonicNs();
  RecoveryResult res;
  const std::string snap_path = JoinPath(dir, kSnapshotName);
  const std::string tmp_path = snap_path + ".tmp";
  if (env->FileExists(tmp_path)) {
    LOG_NOTICE("removing %s left by an interrupted save", tmp_path.c_str());
    PION_RETURN_IF_ERROR(env->RemoveFile(tmp_path));
  }

  // 1. The snapshot.
  SnapHeader snap;
  if (env->FileExists(snap_path)) {
    LOG_NOTICE("loading snapshot %s", snap_path.c_str());
    // A mapped load keeps the rows in the page cache: no heap to grow for them.
    if (env == PosixEnv() && !opt.map_snapshot) {
      auto sz = env->FileSize(snap_path);
      if (sz.ok()) PrefaultHeap(*sz, opt.keep_freed_heap);
    }
    PION_RETURN_IF_ERROR(LoadSnapshot(env, snap_path, sink, &res.snapshot, nullptr,
                                      opt.map_snapshot, opt.snapshot_verify_threads));
    snap = res.snapshot.header;
    res.snapshot_loaded = true;
    LOG_NOTICE(
        "snapshot loaded%s, verified on %u thread%s: %llu namespaces, %llu rows, "
        "%llu bytes in %.3f s (%.0f MB/s)",
        res.snapshot.mapped ? " (mapped)" : "", res.snapshot.verify_threads,
        res.snapshot.verify_threads == 1 ? "" : "s",
        static_cast<unsigned long long>(res.snapshot.namespaces),
        static_cast<unsigned long long>(res.snapshot.rows),
        static_cast<unsigned long long>(res.snapshot.file_bytes), res.snapshot.seconds,
        res.snapshot.seconds > 0
            ? static_cast<double>(res.snapshot.file_bytes) / 1e6 / res.snapshot.seconds
            : 0.0);
  }

  // 2. The WAL files, by generation.
  auto names = env->ListDir(dir);
  if (!names.ok()) return names.status();
  std::vector<WalFile> files;
  std::vector<std::string> obsolete;
  // The highest generation named in a file name ("pion.vstore.wal.<G>").
  uint64_t max_named = 0;
  for (const auto& n : *names)
    if (IsWalFileName(n) && n.size() > std::string_view(kWalName).size())
      max_named = std::max<uint64_t>(
          max_named, std::strtoull(n.c_str() + std::string_view(kWalName).size() + 1, nullptr, 10));
  for (const auto& n : *names) {
    if (!IsWalFileName(n)) continue;
    std::string p = JoinPath(dir, n);
    auto sz = env->FileSize(p);
    if (!sz.ok()) return sz.status();
    auto rd = WalReader::Open(env, p);
    if (!rd.ok()) {
      // A file without a complete header: a crash right after its creation.
      std::vector<uint8_t> head(std::min<uint64_t>(*sz, kWalHeaderSize));
      bool zero = true;
      if (!head.empty()) {
        auto f = env->NewReadableFile(p);
        if (f.ok()) (void)(*f)->ReadAt(0, head.size(), head.data());
        zero = std::all_of(head.begin(), head.end(), [](uint8_t b) { return b == 0; });
      }
      // A transient file of the newest generation whose header never became
      // durable (created at a save barrier just before a crash) is also a torn creation.
      bool newest_transient = n.size() > std::string_view(kWalName).size() &&
                              std::strtoull(n.c_str() + std::string_view(kWalName).size() + 1,
                                            nullptr, 10) == max_named;
      if (*sz < kWalHeaderSize || zero || newest_transient) {
        LOG_WARNING("WAL %s: incomplete header (%llu bytes), removed", p.c_str(),
                    static_cast<unsigned long long>(*sz));
        PION_RETURN_IF_ERROR(env->RemoveFile(p));
        continue;
      }
      if (!opt.wal_repair)
        return Status::Corruption("WAL " + p +
                                  " corrupt at offset 0: " + std::string(rd.status().message()) +
                                  "; refusing to start (use --wal-repair to set it aside)");
      LOG_WARNING("WAL %s: bad header (%s); --wal-repair: renamed to %s.corrupt", p.c_str(),
                  std::string(rd.status().message()).c_str(), p.c_str());
      PION_RETURN_IF_ERROR(env->Rename(p, p + ".corrupt"));
      continue;
    }
    WalFile wf{n, (*rd)->header()};
    if (wf.header.generation < snap.generation) {
      obsolete.push_back(n);
      continue;
    }
    files.push_back(wf);
  }
  std::sort(files.begin(), files.end(), [](const WalFile& a, const WalFile& b) {
    return a.header.generation < b.header.generation;
  });
  for (size_t i = 1; i < files.size(); ++i)
    if (files[i].header.generation == files[i - 1].header.generation)
      return Status::Corruption("WAL files " + files[i - 1].name + " and " + files[i].name +
                                " have the same generation");

  // 3. Replay.
  uint64_t expect = snap.next_lsn;
  bool stop = false;  // a torn or repaired tail ended the log
  bool prev_torn = false;
  std::vector<std::string> live;
  uint64_t next_log = MonotonicNs() + 1000000000ull;
  for (size_t i = 0; i < files.size(); ++i) {
    const WalFile& wf = files[i];
    std::string p = JoinPath(dir, wf.name);
    if (stop) {
      LOG_WARNING("WAL %s: follows a torn log end, holds no acknowledged writes; removed",
                  p.c_str());
      PION_RETURN_IF_ERROR(env->RemoveFile(p));
      continue;
    }
    if (wf.header.first_lsn > expect) {
      std::string why = "WAL " + p + " starts at lsn " + std::to_string(wf.header.first_lsn) +
                        " but lsn " + std::to_string(expect) + " was expected";
      if (prev_torn || opt.wal_repair) {
        LOG_WARNING("%s; removing it and every newer WAL file", why.c_str());
        PION_RETURN_IF_ERROR(env->RemoveFile(p));
        stop = true;
        continue;
      }
      return Status::Corruption(why + " (records missing); refusing to start (use --wal-repair)");
    }
    prev_torn = false;
    auto rd_r = WalReader::Open(env, p);
    if (!rd_r.ok()) return rd_r.status();
    WalReader& rd = **rd_r;
    WalRecord rec;
    uint64_t cut = 0;  // truncate the file here (0 = no)
    while (rd.Next(&rec)) {
      if (rec.lsn < expect) {
        ++res.wal_skipped;
        continue;
      }
      bool applied = false;
      Status s = ApplyRecord(sink, rec, &applied);
      if (!s.ok()) {
        std::string why = "WAL " + p + " record at offset " + std::to_string(rec.offset) +
                          " (lsn " + std::to_string(rec.lsn) +
                          ") cannot be applied: " + std::string(s.message());
        if (!opt.wal_repair)
          return Status::Corruption(why + "; refusing to start (use --wal-repair)");
        LOG_WARNING("%s; --wal-repair: skipped", why.c_str());
        applied = false;
      }
      expect = rec.lsn + 1;
      if (applied)
        ++res.wal_replayed;
      else
        ++res.wal_skipped;
      if (MonotonicNs() >= next_log) {
        next_log = MonotonicNs() + 1000000000ull;
        LOG_NOTICE("replaying WAL %s: %llu of %llu bytes, %llu records", p.c_str(),
                   static_cast<unsigned long long>(rec.offset),
                   static_cast<unsigned long long>(rd.file_size()),
                   static_cast<unsigned long long>(res.wal_replayed));
      }
    }
    if (!rd.status().ok()) return rd.status();
    uint64_t end = rd.end_offset();
    if (rd.end() == WalEnd::kTorn) {
      cut = rd.file_size() - end;
      LOG_WARNING("WAL %s: torn tail at offset %llu (%llu bytes: %s) truncated", p.c_str(),
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(cut),
                  rd.reason().c_str());
      prev_torn = true;
    } else if (rd.end() == WalEnd::kStale) {
      // A recycled file's old records after the last one of this generation
      // (docs/wal_format.md §5): the end of the log, cut like a torn tail.
      cut = rd.file_size() - end;
      LOG_NOTICE(
          "WAL %s: records end at offset %llu; the %llu bytes after it are records of "
          "generation %llu (the file's earlier use), truncated",
          p.c_str(), static_cast<unsigned long long>(end), static_cast<unsigned long long>(cut),
          static_cast<unsigned long long>(rd.stale_generation()));
      prev_torn = true;
    } else if (rd.end() == WalEnd::kCorrupt) {
      std::string why = "WAL " + p + " corrupt at offset " + std::to_string(end) + ": " +
                        rd.reason() + " (a valid record follows at offset " +
                        std::to_string(rd.resync_offset()) + ")";
      if (!opt.wal_repair)
        return Status::Corruption(why +
                                  "; refusing to start (use --wal-repair to drop everything "
                                  "from this offset on)");
      cut = rd.file_size() - end;
      LOG_WARNING("%s; --wal-repair: %llu bytes dropped", why.c_str(),
                  static_cast<unsigned long long>(cut));
      stop = true;
    } else if (rd.file_size() > end) {
      // Preallocated zeros: cut them so the writer appends at the end of the records.
      cut = rd.file_size() - end;
    }
    res.wal_bytes_read += end;
    if (cut > 0) {
      PION_RETURN_IF_ERROR(env->TruncateFile(p, end));
      res.torn_bytes += cut;
    }
    ++res.wal_files;
    live.push_back(wf.name);
    res.active_name = wf.name;
    res.generation = wf.header.generation;
    res.end = end;
    res.continue_existing = true;
    // The next LSN of this file, whether or not its records were replayed.
    expect = std::max(expect, rd.next_lsn());
  }
  if (!res.continue_existing) {
    res.active_name = kWalName;
    res.generation = std::max<uint64_t>(snap.generation, 1);
  }
  res.next_lsn = expect;
  for (const auto& n : obsolete) {
    LOG_NOTICE("removing WAL %s (older than the snapshot)", JoinPath(dir, n).c_str());
    PION_RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, n)));
  }
  if (!obsolete.empty() || res.torn_bytes > 0) PION_RETURN_IF_ERROR(env->SyncDir(dir));
  res.live_wal_names = std::move(live);
  if (opt.keep_freed_heap) opt.keep_freed_heap(0);  // back to the process's own setting
  res.seconds = static_cast<double>(MonotonicNs() - t0) / 1e9;
  if (res.wal_files > 0)
    LOG_NOTICE("WAL replayed: %llu records applied, %llu skipped, %llu bytes, %.3f s",
               static_cast<unsigned long long>(res.wal_replayed),
               static_cast<unsigned long long>(res.wal_skipped),
               static_cast<unsigned long long>(res.wal_bytes_read), res.seconds);
  *out = std::move(res);
  return Status::OK();
}

}  // namespace pion::persist
