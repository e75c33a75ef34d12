// Snapshot writer and loader (docs/snapshot_format.md). The writer takes the
// pinned views of a SnapshotSource and writes them with no store lock held
// (clients keep reading and writing): `<path>.tmp`, every write checked,
// fdatasync, rename over `<path>`, fsync of the directory. The loader checks
// every section before applying it to a RecordSink.
//
// Thread-safety: free functions; concurrent calls must use different paths.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "persist/env.h"
#include "persist/records.h"
#include "persist/wal_format.h"

namespace pion::persist {

struct SnapshotStats {
  SnapHeader header;
  uint64_t file_bytes = 0;
  uint64_t namespaces = 0;
  uint64_t rows = 0;       // rows in ROWS sections
  uint64_t row_bytes = 0;  // their bytes
  uint64_t sections = 0;
  uint64_t strings = 0;         // STRING and STRING_TIER sections (versions 2, 7)
  uint64_t tier_refs = 0;       // of which STRING_TIER (version 7)
  uint64_t ns_tier_refs = 0;    // NAMESPACE_TIER sections (version 8)
  uint64_t tier_rows = 0;       // the rows they reference (not in `rows`)
  bool mapped = false;          // loaded from a mapping (rows may be kept by reference)
  uint32_t verify_threads = 1;  // threads that verified the section CRCs
  double seconds = 0;
};

struct SnapshotWriteOptions {
  // Strings whose value is in the disk tier (SnapshotString::in_tier) become
  // STRING_TIER sections (references) instead of STRING sections (copies), and
  // namespace chunks in it (SnapshotSegment::in_tier) a NAMESPACE_TIER section
  // instead of ROWS.
  bool tier_refs = false;
  // Called after the file was synced and before the rename (the tier's sync);
  // an error fails the write like any other.
  std::function<Status()> before_rename;
};

// Writes a snapshot of `views` to `path` atomically (temp file + rename). On any
// failure the temp file is removed and `path` is untouched.
// `strings` (may be null): the string keys, written as STRING (or STRING_TIER) sections.
Status WriteSnapshot(Env* env, const std::string& path, const SnapHeader& header,
                     const std::vector<SnapshotNamespace>& views, SnapshotStats* stats,
                     const std::vector<SnapshotString>* strings = nullptr,
                     const SnapshotWriteOptions* opts = nullptr);

// Reads and checks `path`; applies it to `sink` unless sink is nullptr (check
// only, pion-check). Corruption names the offset. *bad_offset gets the offset of
// the first bad byte on failure. `map`: map the file (Env::MapReadOnly; read it
// if the Env cannot) and hand rows to the sink as StoreRecs with a `backing`, so
// that it may keep them by reference (docs/snapshot_format.md §5). Every section's
// CRC is verified before it is applied either way. `verify_threads` (mapped
// loads only; 0 counts as 1): a mapped file's section CRCs are verified on that
// many threads, the caller's included, before the sections are decoded and
// applied in file order on the caller's thread.
Status LoadSnapshot(Env* env, const std::string& path, RecordSink* sink, SnapshotStats* stats,
                    uint64_t* bad_offset = nullptr, bool map = false, uint32_t verify_threads = 1);
// Into a data object of another type (the store), through MakeRecordSink(data),
// found by argument-dependent lookup.
template <class Data>
requires(!std::is_convertible_v<Data*, RecordSink*>) Status
    LoadSnapshot(Env* env, const std::string& path, Data* data, SnapshotStats* stats,
                 uint64_t* bad_offset = nullptr, bool map = false, uint32_t verify_threads = 1) {
  auto sink = MakeRecordSink(data);
  return LoadSnapshot(env, path, sink.get(), stats, bad_offset, map, verify_threads);
}

}  // namespace pion::persist
