// Unit tests of recovery (snapshot + WAL replay): LRU order, a torn or zeroed
// tail, mid-file corruption and --wal-repair, a corrupt snapshot, a power cut
// with a record written out of order, and recycled WAL files (stale records
// past the end of the log).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "persist/testing/persist_fixture.h"
#include "persist/wal_reader.h"
#include "store/prefix_ops.h"

namespace pion::persist {
namespace {

using store::Store;
using testing::Dump;
using testing::Fill;
using testing::HeaderLsn;
using testing::HookEnv;
using testing::kDir;
using testing::kSnap;
using testing::kWal;
using testing::Latch;
using testing::Node;
using testing::RecoveredNode;
using testing::StoreDump;
using testing::WriteThree;

TEST(Recovery, SnapshotPlusWalAndLruOrder) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "old", quant::Format::kInt8, 32, 2, 0, 8, 1, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "mid", quant::Format::kFp8, 32, 2, 0, 8, 2, &lsn).ok());
    store::OpLookup({n.store}, "old");  // "old" is now the most recently used
    ASSERT_TRUE(n.persist->Save("").ok());
    ASSERT_TRUE(Fill(n.store, "new", quant::Format::kTurbo3, 64, 1, 0, 4, 3, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "mid", quant::Format::kFp8, 32, 2, 8, 8, 4, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    EXPECT_GT(n.persist->Stats().wal_appended, 0u);
  }
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
  // Only the WAL records after the snapshot replayed.
  EXPECT_EQ(m.persist->Stats().wal_replayed, (1u + 2) + (1 + 4));
  // LRU order: the snapshot had mid < old; the WAL then touched new and mid, so
  // old is now the least recently used.
  Status st;
  auto views = m.store.CaptureSnapshot(nullptr, &st);
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].ns, "old");
}

TEST(Recovery, LruOrderFromSnapshot) {
  FaultEnv env;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    for (const char* ns : {"a", "b", "c", "d"})
      ASSERT_TRUE(Fill(n.store, ns, quant::Format::kFp16, 8, 1, 0, 1, 1, &lsn).ok());
    store::OpLookup({n.store}, "b");
    store::OpLookup({n.store}, "a");
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  RecoveredNode m(&env);
  Status st;
  auto views = m.store.CaptureSnapshot(nullptr, &st);
  std::vector<std::string> order;
  for (auto& v : views) order.push_back(v.ns);
  EXPECT_EQ(order, (std::vector<std::string>{"c", "d", "b", "a"}));
}

// Appends `n` bytes of a partial record to the WAL file (a crash mid-append).
void AppendBytes(FaultEnv& env, const std::string& path, const std::vector<uint8_t>& extra) {
  auto b = env.GetFile(path);
  b.insert(b.end(), extra.begin(), extra.end());
  env.SetFile(path, b);
}

TEST(Recovery, TornTailIsTruncated) {
  FaultEnv env;
  uint64_t size = 0;
  StoreDump want = WriteThree(env, &size);
  // The first 30 bytes of a copy of the last record: a torn append.
  auto b = env.GetFile(kWal);
  std::vector<uint8_t> torn(b.begin() + 40, b.begin() + 70);
  PutU64(torn.data() + 12, 1000);  // an lsn that is not the expected one either
  AppendBytes(env, kWal, torn);
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(env.GetFile(kWal).size(), size);
  // Appending continues on a clean end.
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(m.store, "z", quant::Format::kFp16, 16, 1, 0, 1, 3, &lsn).ok());
  ASSERT_TRUE(m.persist->Commit().ok());
  auto want2 = Dump(m.store);
  m.persist.reset();
  RecoveredNode k(&env);
  EXPECT_EQ(Dump(k.store), want2);
}

TEST(Recovery, ZeroTailIsCleanEnd) {
  FaultEnv env;
  uint64_t size = 0;
  StoreDump want = WriteThree(env, &size);
  AppendBytes(env, kWal, std::vector<uint8_t>(4096, 0));
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
}

TEST(Recovery, MidFileCorruptionRefusedUnlessRepair) {
  FaultEnv env;
  uint64_t size = 0;
  StoreDump want = WriteThree(env, &size);
  auto good = env.GetFile(kWal);
  auto bad = good;
  bad[40 + 30] ^= 0x40;  // inside the first record
  env.SetFile(kWal, bad);
  {
    Node m(&env);
    Status s = m.persist->Recover();
    ASSERT_EQ(s.code(), Code::kCorruption);
    EXPECT_NE(s.message().find("pion.vstore.wal corrupt at offset 40"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("--wal-repair"), std::string::npos);
  }
  EXPECT_EQ(env.GetFile(kWal), bad);  // untouched
  {
    RecoveredNode m(&env, SyncPolicy::kAlways, /*repair=*/true);
    EXPECT_EQ(m.store.NamespaceCount(), 0u);  // everything from the bad record on is gone
  }
  EXPECT_EQ(env.GetFile(kWal).size(), 40u);
}

TEST(Recovery, CorruptSnapshotRefused) {
  FaultEnv env;
  {
    RecoveredNode n(&env);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "s", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  auto b = env.GetFile(kSnap);
  b[b.size() / 2] ^= 1;
  env.SetFile(kSnap, b);
  Node m(&env);
  Status s = m.persist->Recover();
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("snapshot /db/pion.vstore corrupt at offset"), std::string::npos);
}

// Stores `rows` rows (values from `seed`) into one layer of one side.
Status StoreOne(Store& s, const std::string& side_key, uint32_t dim, uint64_t start, uint64_t rows,
                uint64_t seed, uint64_t* lsn) {
  std::vector<float> v(rows * dim);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((i * 2654435761u + seed * 97) % 1000) / 250.f - 2.f;
  store::RowInput in;
  in.data = v.data();
  in.bytes = v.size() * sizeof(float);
  return store::OpStoreRows({s, lsn}, side_key, 0, start, rows, in);
}

// How the WAL at `path` ends when read through: WalEnd, the offset where the
// valid records stop and the reader's reason.
struct WalScan {
  WalEnd end = WalEnd::kCorrupt;
  uint64_t offset = 0;
  std::string reason;
};

WalScan ScanWal(Env* env, const std::string& path) {
  WalScan out;
  auto rd = WalReader::Open(env, path);
  if (!rd.ok()) {
    ADD_FAILURE() << "cannot open " << path;
    return out;
  }
  WalRecord rec;
  while ((*rd)->Next(&rec)) {
  }
  out.end = (*rd)->end();
  out.offset = (*rd)->end_offset();
  out.reason = (*rd)->reason();
  return out;
}

// A power cut while record N = acked + 1 is being written and N + 1 is complete.
// `hook_env`'s hook must stop, on `hold`, the header write of the record whose
// LSN is `block_lsn` (set here). Record N (rows of "a_pk") is appended on a
// thread and held before its header; N + 1 (rows of "b_pv") is appended in
// full; `while_held` runs with N still held; the image of `base` at that moment
// is returned, then N is let go. `lsn_b` gets N + 1's LSN.
DiskImage CrashWithHeldRecord(RecoveredNode& n, FaultEnv& base, Latch& hold,
                              std::atomic<uint64_t>& block_lsn, uint64_t acked, uint64_t* lsn_b,
                              const std::function<void()>& while_held = {}) {
  block_lsn = acked + 1;
  uint64_t lsn_a = 0;
  Status sa;
  std::thread ta([&] { sa = StoreOne(n.store, "a_pk", 64, 8, 4, 3, &lsn_a); });
  hold.AwaitEntered();
  EXPECT_TRUE(StoreOne(n.store, "b_pv", 64, 0, 4, 4, lsn_b).ok());
  EXPECT_EQ(*lsn_b, acked + 2);
  if (while_held) while_held();
  DiskImage image = base.Snapshot();
  hold.Open();
  ta.join();
  EXPECT_TRUE(sa.ok());
  return image;
}

// A crash while record N is still being written (its rows are on the disk, its
// header is not: a hole) and record N+1 is complete and reached the disk:
// nothing past N-1 was acknowledged, and recovery takes the hole followed by
// N+1 as a torn tail and recovers exactly the contiguous prefix.
TEST(ConcurrentAppend, CrashWithOutOfOrderWriteRecoversContiguousPrefix) {
  FaultEnv base;
  HookEnv env(&base);
  Latch hold;
  std::atomic<uint64_t> block_lsn{0};
  env.hook = [&](uint64_t off, std::span<const uint8_t> data, WritableFile* f) -> Status {
    if (block_lsn != 0 && HeaderLsn(data) == block_lsn) hold.Wait();
    return f->WriteAt(off, data);
  };
  StoreDump want;
  DiskImage image;
  {
    RecoveredNode n(&env, SyncPolicy::kAlways);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 64, 1, 0, 8, 1, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "b", quant::Format::kInt8, 64, 0, 0, 0, 2, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    const uint64_t acked = lsn;
    want = Dump(n.store);
    uint64_t lsn_b = 0;
    // The kernel wrote every page back except record N's header; power cut.
    image = CrashWithHeldRecord(n, base, hold, block_lsn, acked, &lsn_b, [&] {
      // Asked to sync everything reserved (up to lsn_b), the writer may still
      // only make durable what is contiguous: the held record N pins both marks.
      EXPECT_EQ(n.persist->wal()->RequestSync(), lsn_b);
      EXPECT_EQ(n.persist->wal()->last_lsn(), acked);
      EXPECT_EQ(n.persist->durable_lsn(), acked);  // lsn_b is written but not acknowledged
    });
  }
  FaultEnv disk(image, 7);
  const WalScan scan = ScanWal(&disk, kWal);
  EXPECT_EQ(scan.end, WalEnd::kTorn) << scan.reason;
  RecoveredNode m(&disk);
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(disk.GetFile(kWal).size(), scan.offset);
}

// Recycling (docs/wal_format.md §6): the first compaction keeps the retired
// WAL as the spare, the second one reuses it for the new generation, whose
// records then overwrite stale records of generation 1. A crash while record N
// is being written (rows written, header not) with N+1 complete must still read
// as a hole followed by N+1 (a torn tail), not as corruption: the writer zeroed
// N's header slot, which held a stale header, before N+1 was reserved. The
// stale tail past N+1 is a torn tail too; a clean close cuts it itself.
TEST(WalRecycling, SpareIsReusedAndACrashInStaleSpaceRecoversThePrefix) {
  FaultEnv base;
  HookEnv env(&base);
  Latch hold;
  std::atomic<uint64_t> block_lsn{0};
  env.hook = [&](uint64_t off, std::span<const uint8_t> data, WritableFile* f) -> Status {
    if (block_lsn != 0 && HeaderLsn(data) == block_lsn) hold.Wait();
    return f->WriteAt(off, data);
  };
  const std::string kSpare = kDir + "/" + kWalSpareName;
  StoreDump want, last;
  DiskImage image;
  {
    RecoveredNode n(&env, SyncPolicy::kAlways);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 64, 1, 0, 8, 1, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "b", quant::Format::kInt8, 64, 0, 0, 0, 2, &lsn).ok());
    for (uint64_t i = 0; i < 8; ++i)
      ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 0, 4, 10 + i, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    EXPECT_TRUE(base.FileExists(kSpare));  // generation 1, retired
    EXPECT_EQ(n.persist->wal()->Stats().recycled, 0u);
    for (uint64_t i = 0; i < 2; ++i)
      ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 0, 4, 20 + i, &lsn).ok());
    const uint64_t spare_size = base.GetFile(kSpare).size();
    ASSERT_TRUE(n.persist->Save("").ok());
    EXPECT_EQ(n.persist->wal()->Stats().recycled, 1u);
    EXPECT_TRUE(base.FileExists(kSpare));  // generation 2, retired in turn
    // Generation 3 lives in generation 1's file: stale records past its header.
    EXPECT_EQ(base.GetFile(kWal).size(), spare_size);
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    const uint64_t acked = lsn;
    want = Dump(n.store);
    uint64_t lsn_b = 0;
    // Every page reached the disk except record N's header; power cut.
    image = CrashWithHeldRecord(n, base, hold, block_lsn, acked, &lsn_b);
    ASSERT_TRUE(n.persist->WaitDurable(lsn_b).ok());
    last = Dump(n.store);
  }
  {
    FaultEnv disk(image, 7);
    const WalScan scan = ScanWal(&disk, kWal);
    EXPECT_EQ(scan.end, WalEnd::kTorn) << scan.reason;
    RecoveredNode m(&disk);
    EXPECT_EQ(Dump(m.store), want);
    EXPECT_EQ(disk.GetFile(kWal).size(), scan.offset);
  }
  // The clean close cut the stale tail: the log ends cleanly at its last record.
  const WalScan scan = ScanWal(&base, kWal);
  EXPECT_EQ(scan.end, WalEnd::kClean) << scan.reason;
  EXPECT_EQ(scan.offset, base.GetFile(kWal).size());
  RecoveredNode k(&base);
  EXPECT_EQ(Dump(k.store), last);
  // The spare left by the last compaction is adopted: the next one recycles it.
  ASSERT_TRUE(k.persist->Save("").ok());
  EXPECT_EQ(k.persist->wal()->Stats().recycled, 1u);
}

// Two compactions: the first keeps generation 1's file as the spare, the second
// recycles it for generation 3 (one record of `seed` stored in between).
void RecycleGeneration1(RecoveredNode& n, uint64_t seed, uint64_t* lsn) {
  ASSERT_TRUE(n.persist->Save("").ok());  // generation 1 becomes the spare
  ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 0, 4, seed, lsn).ok());
  ASSERT_TRUE(n.persist->Save("").ok());  // generation 3 lives in its file
  ASSERT_EQ(n.persist->wal()->Stats().recycled, 1u);
}

// A process killed after appending into a recycled file (no clean close to cut
// it) leaves the file's old records after its last one. With a whole record of
// the older generation there, that is the end of the log (a stale tail), not a
// torn append: recovered the same way, reported as what it is.
TEST(WalRecycling, AKilledProcessLeavesAStaleTail) {
  FaultEnv base;
  StoreDump want;
  DiskImage image;
  {
    RecoveredNode n(&base, SyncPolicy::kAlways);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 64, 1, 0, 8, 1, &lsn).ok());
    for (uint64_t i = 0; i < 8; ++i)
      ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 0, 4, 10 + i, &lsn).ok());
    RecycleGeneration1(n, 20, &lsn);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(StoreOne(n.store, "a_pv", 64, 0, 4, 21, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    want = Dump(n.store);
    image = base.Snapshot();  // SIGKILL: everything written, nothing cut
  }
  FaultEnv disk(image, 7);
  const WalScan scan = ScanWal(&disk, kWal);
  EXPECT_EQ(scan.end, WalEnd::kStale) << scan.reason;
  EXPECT_NE(scan.reason.find("generation 1 "), std::string::npos) << scan.reason;
  EXPECT_LT(scan.offset, disk.GetFile(kWal).size());
  RecoveredNode m(&disk);
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(disk.GetFile(kWal).size(), scan.offset);
  EXPECT_EQ(ScanWal(&disk, kWal).end, WalEnd::kClean);
}

// wal-recycle no: a spare left by an earlier run is removed at start-up, and a
// compaction removes the file it retires instead of keeping it.
TEST(WalRecycling, OffKeepsNoSpare) {
  FaultEnv env;
  const std::string kSpare = kDir + "/" + kWalSpareName;
  StoreDump want;
  {
    RecoveredNode n(&env, SyncPolicy::kAlways);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 64, 1, 0, 8, 1, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    ASSERT_TRUE(env.FileExists(kSpare));
  }
  {
    RecoveredNode n(&env, SyncPolicy::kAlways, false, /*recycle=*/false);
    EXPECT_FALSE(env.FileExists(kSpare));
    uint64_t lsn = 0;
    for (uint64_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 0, 4, 30 + i, &lsn).ok());
      ASSERT_TRUE(n.persist->Save("").ok());
      EXPECT_FALSE(env.FileExists(kSpare));
    }
    EXPECT_EQ(n.persist->wal()->Stats().recycled, 0u);
    want = Dump(n.store);
  }
  RecoveredNode m(&env, SyncPolicy::kAlways, false, /*recycle=*/false);
  EXPECT_EQ(Dump(m.store), want);
}

// A recycled file that is rotated away before the log outgrew it (a save that
// failed or a crash during the save, so that a newer file follows it) ends at
// its last record: a stale tail there would read as a torn log end in front of
// the newer file.
TEST(WalRecycling, RecycledFileRotatedAwayEndsAtItsLastRecord) {
  FaultEnv env;
  StoreDump want;
  DiskImage image;
  {
    RecoveredNode n(&env, SyncPolicy::kAlways);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 64, 2, 0, 64, 1, &lsn).ok());
    RecycleGeneration1(n, 5, &lsn);  // the large generation-1 file
    if (HasFatalFailure()) return;
    ASSERT_TRUE(StoreOne(n.store, "a_pv", 64, 0, 4, 6, &lsn).ok());
    // The barrier of a save that never finishes: generation 4 follows generation 3.
    uint64_t gen = 0, first = 0;
    std::string name;
    ASSERT_TRUE(n.persist->wal()->Rotate(kWalName, &gen, &first, &name).ok());
    ASSERT_EQ(gen, 4u);
    ASSERT_TRUE(StoreOne(n.store, "a_pk", 64, 4, 4, 7, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    want = Dump(n.store);
    image = env.Snapshot();  // crash
  }
  FaultEnv disk(image, 7);
  const WalScan scan = ScanWal(&disk, kWal);  // generation 3
  EXPECT_EQ(scan.end, WalEnd::kClean) << scan.reason;
  RecoveredNode m(&disk);
  EXPECT_EQ(Dump(m.store), want);
}

}  // namespace
}  // namespace pion::persist
