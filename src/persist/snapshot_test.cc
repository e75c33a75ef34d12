// Unit tests of snapshots (docs/snapshot_format.md): every format bit-identical
// after a restart, SAVE to another path, and mapped snapshots (chunks kept by
// reference, copy on write, corruption found at load, parallel verification).
#include "persist/snapshot.h"

#include <gtest/gtest.h>

#include <iterator>

#include "persist/testing/persist_fixture.h"
#include "store/prefix_ops.h"

namespace pion::persist {
namespace {

using store::Store;
using store::StoreConfig;
using testing::Dump;
using testing::Fill;
using testing::kAllFormats;
using testing::kSnap;
using testing::kWal;
using testing::Node;
using testing::RecoveredNode;
using testing::StoreDump;
using testing::WriteAndReopen;

TEST(Snapshot, EveryFormatBitIdenticalAfterRestart) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "f" + std::to_string(i), kAllFormats[i], 128, 3, 0, 40, 10 + i, &lsn, true)
              .ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    want = Dump(n.store);
  }
  EXPECT_TRUE(env.FileExists(kSnap));
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(m.persist->Stats().wal_replayed, 0u);
  // Block tables survive.
  auto bt = store::OpBlocks({m.store}, "f0");
  ASSERT_NE(bt, nullptr);
  EXPECT_EQ(bt->hashes.size(), 5u);
  EXPECT_TRUE(bt->Contains(bt->hashes[3]));
}

TEST(Snapshot, EmptyStoreSavesValidSnapshot) {
  FaultEnv env;
  {
    RecoveredNode n(&env);
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, kSnap, nullptr, &st).ok());
  EXPECT_EQ(st.namespaces, 0u);
  RecoveredNode m(&env);
  EXPECT_EQ(m.store.NamespaceCount(), 0u);
}

TEST(Snapshot, SparseLayerKeepsRowCountAndZeros) {
  FaultEnv env;
  WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    // Rows far apart leave chunks never allocated in between.
    ASSERT_TRUE(Fill(n.store, "sp", quant::Format::kFp16, 256, 1, 0, 2, 3, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "sp", quant::Format::kFp16, 256, 1, 5000, 1, 4, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
  });
}

TEST(Save, PathValidation) {
  EXPECT_TRUE(Persistence::ValidateSavePath("backup.vstore").ok());
  EXPECT_TRUE(Persistence::ValidateSavePath("sub/x..y").ok());
  for (const char* bad : {"", "/etc/x", "~/x", "../x", "a/../b", "a/..", "a\x01", "a\x7f",
                          "pion.vstore.wal", "pion.vstore.wal.3", "x.tmp", "a/"})
    EXPECT_FALSE(Persistence::ValidateSavePath(bad).ok()) << bad;
}

TEST(Save, CustomPathDoesNotTouchWal) {
  FaultEnv env;
  RecoveredNode n(&env);
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  auto wal = env.GetFile(kWal);
  ASSERT_TRUE(n.persist->Save("backup.vstore").ok());
  EXPECT_EQ(env.GetFile(kWal), wal);
  EXPECT_FALSE(env.FileExists(kSnap));
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, "/db/backup.vstore", nullptr, &st).ok());
  EXPECT_EQ(st.namespaces, 1u);
  EXPECT_EQ(st.header.next_lsn, lsn + 1);
}

// How many of a layer's fetched rows lie inside [lo, hi) (a mapping).
uint64_t RowsInside(Store& s, const std::string& sid, uint32_t layer, uint64_t end,
                    std::pair<const uint8_t*, const uint8_t*> range) {
  auto plan = store::OpFetchRange({s}, sid, layer, 0, end);
  EXPECT_TRUE(plan.ok());
  if (!plan.ok()) return 0;
  uint64_t n = 0;
  for (const auto& seg : plan->segments)
    if (seg.data != nullptr && seg.data >= range.first && seg.data < range.second) n += seg.rows;
  return n;
}

// Offsets of the rows of every ROWS section of a version 4 snapshot.
std::vector<uint64_t> RowsOffsets(const std::vector<uint8_t>& f) {
  std::vector<uint64_t> out;
  uint64_t off = kSnapHeaderSize;
  while (off + kRecordHeaderSize <= f.size()) {
    uint64_t len = GetU32(f.data() + off + 4);
    if (f[off + 8] == static_cast<uint8_t>(RecordType::kSnapRows)) {
      uint64_t ns_len = GetU16(f.data() + off + kRecordHeaderSize);
      out.push_back(off + kRecordHeaderSize + 38 + ns_len);
    }
    off += kRecordHeaderSize + len;
  }
  return out;
}

// A mapped restart (docs/snapshot_format.md §5): the store comes back
// bit-exact, whole chunks point into the mapping (nothing copied), the rows of
// every ROWS section are 64-byte aligned in the file, and the result equals a
// buffered (copying) load of the same file.
TEST(MappedSnapshot, RestartIsBitExactAndKeepsChunksByReference) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    // fp16 at kv_dim 1024: 2 KiB rows, 128 rows per chunk; 300 rows = 2 full
    // chunks and a partial one per layer. Odd-length names shift the offsets.
    ASSERT_TRUE(Fill(n.store, "m", quant::Format::kFp16, 1024, 2, 0, 300, 7, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "odd_name", quant::Format::kInt8, 96, 3, 5, 70, 8, &lsn, true).ok());
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "f" + std::to_string(i), kAllFormats[i], 128, 1, 0, 33, 20 + i, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    want = Dump(n.store);
  }
  auto file = env.GetFile(kSnap);
  ASSERT_EQ(GetU32(file.data() + 8), kSnapVersion);  // PAD sections since version 4
  auto offs = RowsOffsets(file);
  ASSERT_FALSE(offs.empty());
  for (uint64_t o : offs) EXPECT_EQ(o % kSnapRowsAlign, 0u) << o;

  const uint64_t maps0 = env.maps();
  {
    RecoveredNode m(&env);
    EXPECT_EQ(env.maps(), maps0 + 1);
    EXPECT_TRUE(m.persist->Stats().snapshot_mapped);
    EXPECT_EQ(Dump(m.store), want);
    EXPECT_TRUE(env.LastMapInUse());
    // The two full chunks of each layer of "m" (2 KiB rows) are in the mapping;
    // the last, partial one (44 rows; a copy's capacity would be 48) is copied.
    auto range = env.LastMapRange();
    EXPECT_EQ(RowsInside(m.store, "m_pk", 1, 300, range), 256u);
    EXPECT_EQ(RowsInside(m.store, "m_pv", 0, 300, range), 256u);
  }
  EXPECT_FALSE(env.LastMapInUse());  // released with the last chunk

  env.SetMappable(false);
  RecoveredNode k(&env);
  EXPECT_FALSE(k.persist->Stats().snapshot_mapped);
  EXPECT_EQ(Dump(k.store), want);
}

// Writes after a mapped restart copy the chunk they touch (copy on write),
// never the mapping's bytes; they are logged and replay on top of the mapped
// snapshot; a save while mapped replaces the file; dropping everything
// releases the mapping.
TEST(MappedSnapshot, WritesAfterRestartCopyOnWriteAndReplay) {
  FaultEnv env;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "m", quant::Format::kFp16, 1024, 1, 0, 256, 3, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "other", quant::Format::kFp16, 1024, 1, 0, 128, 4, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  const auto snap_bytes = env.GetFile(kSnap);
  StoreDump want;
  {
    RecoveredNode m(&env);
    auto range = env.LastMapRange();
    ASSERT_EQ(RowsInside(m.store, "m_pk", 0, 256, range), 256u);
    uint64_t lsn = 0;
    // Overwrite rows 10..19 (chunk 0) and append 5 rows (a new chunk 2).
    ASSERT_TRUE(Fill(m.store, "m", quant::Format::kFp16, 1024, 1, 10, 10, 99, &lsn).ok());
    ASSERT_TRUE(Fill(m.store, "m", quant::Format::kFp16, 1024, 1, 256, 5, 98, &lsn).ok());
    // Chunk 0 was copied, chunk 1 still by reference; "other" untouched.
    EXPECT_EQ(RowsInside(m.store, "m_pk", 0, 261, range), 128u);
    EXPECT_EQ(RowsInside(m.store, "other_pk", 0, 128, range), 128u);
    ASSERT_TRUE(m.persist->Commit().ok());
    want = Dump(m.store);
  }
  EXPECT_EQ(env.GetFile(kSnap), snap_bytes);  // the snapshot itself never changes
  {
    RecoveredNode m(&env);  // mapped snapshot + WAL replay
    EXPECT_EQ(Dump(m.store), want);
    EXPECT_GT(m.persist->Stats().wal_replayed, 0u);
    // A save while chunks still point into the mapping of the old file.
    ASSERT_TRUE(m.persist->Save("").ok());
    EXPECT_NE(env.GetFile(kSnap), snap_bytes);
    EXPECT_EQ(Dump(m.store), want);
    uint64_t lsn = 0;
    std::string_view names[] = {"m", "other"};
    ASSERT_TRUE(store::OpDrop({m.store, &lsn}, names).ok());
    EXPECT_FALSE(env.LastMapInUse());
    ASSERT_TRUE(m.persist->Commit().ok());
  }
  RecoveredNode k(&env);
  EXPECT_TRUE(Dump(k.store).empty());
}

// A corrupt byte anywhere in a mapped snapshot's rows (or a PAD section) is
// found at load: recovery refuses, nothing is applied from the bad section.
TEST(MappedSnapshot, CorruptRowsOrPadRefusedAtLoad) {
  FaultEnv env;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "m", quant::Format::kFp16, 1024, 2, 0, 200, 5, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  const auto good = env.GetFile(kSnap);
  auto offs = RowsOffsets(good);
  ASSERT_GE(offs.size(), 2u);
  std::vector<uint64_t> flips = {offs[0] + 1, offs.back() + 2047};
  // The first PAD section's payload (or its header when empty).
  for (uint64_t off = kSnapHeaderSize; off + kRecordHeaderSize <= good.size();) {
    if (good[off + 8] == static_cast<uint8_t>(RecordType::kSnapPad)) {
      flips.push_back(off + kRecordHeaderSize - 1);
      break;
    }
    off += kRecordHeaderSize + GetU32(good.data() + off + 4);
  }
  ASSERT_EQ(flips.size(), 3u);
  for (uint64_t at : flips) {
    auto b = good;
    b[at] ^= 0x10;
    env.SetFile(kSnap, b);
    {
      Node m(&env);
      Status s = m.persist->Recover();
      EXPECT_EQ(s.code(), Code::kCorruption) << at;
      EXPECT_NE(s.message().find("snapshot /db/pion.vstore corrupt at offset"), std::string::npos);
    }
    EXPECT_FALSE(env.LastMapInUse());
  }
}

// Parallel verification of a mapped snapshot (snapshot-verify-threads): the
// same store and, for a corrupt byte anywhere, the same refusal at the same
// offset as one thread, and nothing past the bad section applied.
TEST(MappedSnapshot, VerifiedOnSeveralThreadsLikeOne) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    // ~5 MB of fp16 rows: several 1 MiB runs of sections to hand out.
    ASSERT_TRUE(Fill(n.store, "m", quant::Format::kFp16, 1024, 2, 0, 600, 5, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "s", quant::Format::kInt8, 96, 1, 0, 70, 6, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    want = Dump(n.store);
  }
  const auto good = env.GetFile(kSnap);
  ASSERT_GT(good.size(), 4u << 20);
  for (uint32_t threads : {1u, 2u, 4u}) {
    Store s{StoreConfig{}};
    SnapshotStats st;
    ASSERT_TRUE(LoadSnapshot(&env, kSnap, &s, &st, nullptr, true, threads).ok()) << threads;
    EXPECT_TRUE(st.mapped);
    EXPECT_EQ(st.verify_threads, threads);
    EXPECT_EQ(Dump(s), want) << threads;
  }
  auto offs = RowsOffsets(good);
  ASSERT_GE(offs.size(), 4u);
  for (uint64_t at : {offs[0] + 5, offs[offs.size() / 2] + 100, offs.back() + 1, good.size() - 3}) {
    auto b = good;
    b[at] ^= 0x04;
    env.SetFile(kSnap, b);
    Status one;
    uint64_t bad_one = 0;
    {
      Store s{StoreConfig{}};
      one = LoadSnapshot(&env, kSnap, &s, nullptr, &bad_one, true, 1);
    }
    EXPECT_EQ(one.code(), Code::kCorruption) << at;
    Store s{StoreConfig{}};
    uint64_t bad = 0;
    Status many = LoadSnapshot(&env, kSnap, &s, nullptr, &bad, true, 4);
    EXPECT_EQ(many.code(), Code::kCorruption) << at;
    EXPECT_EQ(many.message(), one.message()) << at;
    EXPECT_EQ(bad, bad_one) << at;
    EXPECT_LE(bad, at);
  }
  env.SetFile(kSnap, good);
}

}  // namespace
}  // namespace pion::persist
