// Snapshot writer and loader (docs/snapshot_format.md). The writer takes the
// pinned NamespaceViews of Store::CaptureSnapshot and writes them with no store
// lock held (clients keep reading and writing): `<path>.tmp`, every write
// checked, fdatasync, rename over `<path>`, fsync of the directory. The loader
// checks every section before applying it to the store with the recovery API.
//
// Thread-safety: free functions; concurrent calls must use different paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "persist/env.h"
#include "persist/wal_format.h"
#include "store/store.h"

namespace pion::persist {

struct SnapshotStats {
  SnapHeader header;
  uint64_t file_bytes = 0;
  uint64_t namespaces = 0;
  uint64_t rows = 0;       // rows in ROWS sections
  uint64_t row_bytes = 0;  // their bytes
  uint64_t sections = 0;
  double seconds = 0;
};

// Writes a snapshot of `views` to `path` atomically (temp file + rename). On any
// failure the temp file is removed and `path` is untouched.
Status WriteSnapshot(Env* env, const std::string& path, const SnapHeader& header,
                     const std::vector<store::NamespaceView>& views, SnapshotStats* stats);

// Reads and checks `path`; applies it to `store` unless store is nullptr (check
// only, pion-check). Corruption names the offset. *bad_offset gets the offset of
// the first bad byte on failure.
Status LoadSnapshot(Env* env, const std::string& path, store::Store* store, SnapshotStats* stats,
                    uint64_t* bad_offset = nullptr);

}  // namespace pion::persist
