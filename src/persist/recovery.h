// Start-up recovery (docs/wal_format.md §5): load the snapshot, replay the WAL
// files that follow it into the store through the recovery API, repair a torn
// tail, refuse mid-file corruption unless repair is allowed, and say which WAL
// file to continue appending to.
//
// Thread-safety: runs before the store serves; one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "persist/env.h"
#include "persist/records.h"
#include "persist/snapshot.h"

namespace pion::persist {

struct RecoveryOptions {
  bool wal_repair = false;
  // Called with a large snapshot's size (>= 64 MiB) before the heap is grown
  // for it, and with 0 when recovery ends: the process sets how much freed heap
  // malloc keeps (a process-wide mallopt, so main's to make). nullptr: the
  // setting is left alone.
  std::function<void(uint64_t snapshot_bytes)> keep_freed_heap;
  // Load the snapshot by mapping it (rows kept by reference where aligned;
  // docs/snapshot_format.md §5); false: read and copy it.
  bool map_snapshot = true;
  // Threads that verify a mapped snapshot's section CRCs, this one included
  // (LoadSnapshot's verify_threads; snapshot-verify-threads).
  uint32_t snapshot_verify_threads = 1;
};

struct RecoveryResult {
  bool snapshot_loaded = false;
  SnapshotStats snapshot;
  uint64_t wal_files = 0;
  uint64_t wal_bytes_read = 0;
  uint64_t wal_replayed = 0;  // records applied
  uint64_t wal_skipped = 0;   // records already in the snapshot or of a dropped incarnation
  uint64_t torn_bytes = 0;    // cut off from torn tails (and, with repair, corrupt tails)
  // Where the WAL continues: an existing file (`continue_existing`) at `end`, or a
  // new file to create.
  bool continue_existing = false;
  std::string active_name;
  uint64_t generation = 1;
  uint64_t next_lsn = 1;
  uint64_t end = 0;
  // Every WAL file still needed, oldest generation first (active last when continuing).
  std::vector<std::string> live_wal_names;
  double seconds = 0;
};

// True for "pion.vstore.wal" and "pion.vstore.wal.<digits>".
bool IsWalFileName(std::string_view name);

Status Recover(Env* env, const std::string& dir, RecordSink* sink, const RecoveryOptions& opt,
               RecoveryResult* out);

}  // namespace pion::persist
