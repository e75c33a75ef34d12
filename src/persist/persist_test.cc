// Unit tests of the persistence layer on the fault-injecting Env: formats,
// WAL and snapshot round trips, recovery (torn tail, mid-file corruption,
// repair), full disk during append and save, golden files.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "persist/fault_env.h"
#include "persist/persistence.h"
#include "persist/recovery.h"
#include "persist/snapshot.h"
#include "persist/wal_reader.h"
#include "persist/wal_writer.h"
#include "test_util.h"

namespace pion::persist {
namespace {

using store::Store;
using store::StoreConfig;
using testing::Dump;
using testing::Fill;
using testing::StoreDump;

const std::string kDir = "/db";
const std::string kWal = "/db/pion.vstore.wal";
const std::string kSnap = "/db/pion.vstore";

constexpr quant::Format kAllFormats[] = {
    quant::Format::kInt8, quant::Format::kTurbo4, quant::Format::kTurbo3, quant::Format::kTurbo2,
    quant::Format::kFp16, quant::Format::kFp8,    quant::Format::kMlx4g32};

struct Node {
  explicit Node(Env* env, SyncPolicy p = SyncPolicy::kAlways, bool repair = false)
      : store(StoreConfig{}) {
    PersistOptions o;
    o.dir = kDir;
    o.env = env;
    o.policy = p;
    o.wal_repair = repair;
    o.background = false;
    persist = std::make_unique<Persistence>(&store, o);
  }
  Store store;
  std::unique_ptr<Persistence> persist;
};

TEST(WalFormat, TagsAreFixed) {
  EXPECT_EQ(FormatTag(quant::Format::kInt8), 0);
  EXPECT_EQ(FormatTag(quant::Format::kTurbo4), 1);
  EXPECT_EQ(FormatTag(quant::Format::kFp16), 2);
  EXPECT_EQ(FormatTag(quant::Format::kTurbo3), 3);
  EXPECT_EQ(FormatTag(quant::Format::kTurbo2), 4);
  EXPECT_EQ(FormatTag(quant::Format::kFp8), 5);
  EXPECT_EQ(FormatTag(quant::Format::kMlx4g32), 7);
  EXPECT_FALSE(FormatFromTag(6).has_value());
  for (auto f : kAllFormats) EXPECT_EQ(*FormatFromTag(FormatTag(f)), f);
}

TEST(WalFormat, HeaderRoundTripAndChecks) {
  uint8_t h[kWalHeaderSize];
  EncodeWalHeader({7, 42}, h);
  WalHeader d;
  ASSERT_TRUE(DecodeWalHeader(h, sizeof(h), &d).ok());
  EXPECT_EQ(d.generation, 7u);
  EXPECT_EQ(d.first_lsn, 42u);
  h[20] ^= 1;
  EXPECT_EQ(DecodeWalHeader(h, sizeof(h), &d).code(), Code::kCorruption);
}

TEST(Wal, RoundTripEveryRecordType) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "ns" + std::to_string(i), kAllFormats[i], 64, 2, 0, 5, i, &lsn, i % 2 == 0)
              .ok());
    std::string_view names[] = {"ns1"};
    ASSERT_TRUE(n.store.Drop(names, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    want = Dump(n.store);
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(m.persist->Stats().wal_replayed, 7u * 5 + 1);  // 7 x (register + 4 stores), 1 drop
}

TEST(Wal, FlushAllAndReRegisterReplay) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 8, 1, 0, 3, 1, &lsn).ok());
    ASSERT_TRUE(n.store.FlushAll(&lsn).ok());
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kInt8, 16, 1, 2, 3, 2, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
}

TEST(Snapshot, EveryFormatBitIdenticalAfterRestart) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "f" + std::to_string(i), kAllFormats[i], 128, 3, 0, 40, 10 + i, &lsn, true)
              .ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    want = Dump(n.store);
  }
  EXPECT_TRUE(env.FileExists(kSnap));
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(m.persist->Stats().wal_replayed, 0u);
  // Block tables survive.
  auto bt = m.store.Blocks("f0");
  ASSERT_NE(bt, nullptr);
  EXPECT_EQ(bt->hashes.size(), 5u);
  EXPECT_TRUE(bt->Contains(bt->hashes[3]));
}

TEST(Snapshot, EmptyStoreSavesValidSnapshot) {
  FaultEnv env;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, kSnap, nullptr, &st).ok());
  EXPECT_EQ(st.namespaces, 0u);
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(m.store.NamespaceCount(), 0u);
}

TEST(Snapshot, SparseLayerKeepsRowCountAndZeros) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    // Rows far apart leave chunks never allocated in between.
    ASSERT_TRUE(Fill(n.store, "sp", quant::Format::kFp16, 256, 1, 0, 2, 3, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "sp", quant::Format::kFp16, 256, 1, 5000, 1, 4, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    want = Dump(n.store);
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
}

TEST(Recovery, SnapshotPlusWalAndLruOrder) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "old", quant::Format::kInt8, 32, 2, 0, 8, 1, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "mid", quant::Format::kFp8, 32, 2, 0, 8, 2, &lsn).ok());
    n.store.Lookup("old");  // "old" is now the most recently used
    ASSERT_TRUE(n.persist->Save("").ok());
    ASSERT_TRUE(Fill(n.store, "new", quant::Format::kTurbo3, 64, 1, 0, 4, 3, &lsn).ok());
    ASSERT_TRUE(Fill(n.store, "mid", quant::Format::kFp8, 32, 2, 8, 8, 4, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    EXPECT_GT(n.persist->Stats().wal_appended, 0u);
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
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
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
    uint64_t lsn = 0;
    for (const char* ns : {"a", "b", "c", "d"})
      ASSERT_TRUE(Fill(n.store, ns, quant::Format::kFp16, 8, 1, 0, 1, 1, &lsn).ok());
    n.store.Lookup("b");
    n.store.Lookup("a");
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
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

StoreDump WriteThree(FaultEnv& env, uint64_t* wal_size) {
  Node n(&env);
  PION_CHECK(n.persist->Recover().ok());
  uint64_t lsn = 0;
  PION_CHECK(Fill(n.store, "x", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  PION_CHECK(Fill(n.store, "y", quant::Format::kInt8, 16, 1, 0, 4, 2, &lsn).ok());
  PION_CHECK(n.persist->Commit().ok());
  *wal_size = env.GetFile(kWal).size();
  return Dump(n.store);
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
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
  EXPECT_EQ(env.GetFile(kWal).size(), size);
  // Appending continues on a clean end.
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(m.store, "z", quant::Format::kFp16, 16, 1, 0, 1, 3, &lsn).ok());
  ASSERT_TRUE(m.persist->Commit().ok());
  auto want2 = Dump(m.store);
  m.persist.reset();
  Node k(&env);
  ASSERT_TRUE(k.persist->Recover().ok());
  EXPECT_EQ(Dump(k.store), want2);
}

TEST(Recovery, ZeroTailIsCleanEnd) {
  FaultEnv env;
  uint64_t size = 0;
  StoreDump want = WriteThree(env, &size);
  AppendBytes(env, kWal, std::vector<uint8_t>(4096, 0));
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
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
    Node m(&env, SyncPolicy::kAlways, /*repair=*/true);
    ASSERT_TRUE(m.persist->Recover().ok());
    EXPECT_EQ(m.store.NamespaceCount(), 0u);  // everything from the bad record on is gone
  }
  EXPECT_EQ(env.GetFile(kWal).size(), 40u);
}

TEST(Recovery, CorruptSnapshotRefused) {
  FaultEnv env;
  {
    Node n(&env);
    ASSERT_TRUE(n.persist->Recover().ok());
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

TEST(FullDisk, WalAppendFailsCleanlyAndLaterSucceeds) {
  FaultEnv env;
  Node n(&env);
  ASSERT_TRUE(n.persist->Recover().ok());
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  ASSERT_TRUE(n.persist->Commit().ok());
  auto before = Dump(n.store);
  env.FailNthWrite(1);
  store::RegisterArgs ra;
  ra.ns = "b";
  ra.kv_dim = 16;
  Status s = n.store.Register(ra, &lsn);
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("No space left on device"), std::string::npos);
  EXPECT_EQ(Dump(n.store), before);          // nothing applied
  EXPECT_EQ(n.store.Lookup("a").hit, true);  // reads still served
  ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp16, 16, 1, 0, 2, 3, &lsn).ok());
  ASSERT_TRUE(n.persist->Commit().ok());
  auto want = Dump(n.store);
  n.persist.reset();
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
}

TEST(FullDisk, SaveFailsAndLeavesPreviousStateReplayable) {
  for (uint64_t nth = 1; nth <= 4; ++nth) {
    FaultEnv env;
    StoreDump want;
    std::vector<uint8_t> old_snap;
    {
      Node n(&env);
      ASSERT_TRUE(n.persist->Recover().ok());
      uint64_t lsn = 0;
      ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 512, 4, 0, 300, 1, &lsn).ok());
      ASSERT_TRUE(n.persist->Save("").ok());
      old_snap = env.GetFile(kSnap);
      ASSERT_TRUE(Fill(n.store, "b", quant::Format::kInt8, 512, 4, 0, 300, 2, &lsn).ok());
      env.FailNthWrite(nth);  // the snapshot writes 1 MiB pieces: fail one of them
      Status s = n.persist->Save("");
      EXPECT_EQ(s.code(), Code::kIOError) << nth;
      EXPECT_EQ(env.GetFile(kSnap), old_snap);
      EXPECT_FALSE(env.FileExists(kSnap + ".tmp"));
      ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp8, 64, 1, 0, 3, 3, &lsn).ok());
      ASSERT_TRUE(n.persist->Commit().ok());
      want = Dump(n.store);
    }
    Node m(&env);
    ASSERT_TRUE(m.persist->Recover().ok()) << nth;
    EXPECT_EQ(Dump(m.store), want) << nth;
    // A later save succeeds and compacts every older WAL file.
    ASSERT_TRUE(m.persist->Save("").ok());
    auto names = *env.ListDir(kDir);
    EXPECT_EQ(names, (std::vector<std::string>{"pion.vstore", "pion.vstore.wal"}));
  }
}

TEST(FullDisk, SyncFailureBreaksWalButReadsContinue) {
  FaultEnv env;
  Node n(&env);
  ASSERT_TRUE(n.persist->Recover().ok());
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
  env.FailNthSync(1);
  store::RegisterArgs ra;
  ra.ns = "b";
  ra.kv_dim = 16;
  ASSERT_TRUE(n.store.Register(ra, &lsn).ok());
  EXPECT_EQ(n.persist->WaitDurable(lsn).code(), Code::kIOError);
  EXPECT_EQ(n.store.Register(ra, &lsn).code(), Code::kIOError);
  EXPECT_TRUE(n.store.Lookup("a").hit);
  EXPECT_TRUE(n.persist->Stats().wal_broken);
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
  Node n(&env);
  ASSERT_TRUE(n.persist->Recover().ok());
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

TEST(WalReader, ReportsCorruptionOffsetAndResync) {
  FaultEnv env;
  uint64_t size = 0;
  WriteThree(env, &size);
  auto b = env.GetFile(kWal);
  // Find the second record's offset and corrupt its payload.
  uint64_t second = 40 + 20 + GetU32(b.data() + 40 + 4);
  b[second + 25] ^= 0xFF;
  env.SetFile(kWal, b);
  auto r = WalReader::Open(&env, kWal);
  ASSERT_TRUE(r.ok());
  WalRecord rec;
  int n = 0;
  while ((*r)->Next(&rec)) ++n;
  EXPECT_EQ(n, 1);
  EXPECT_EQ((*r)->end(), WalEnd::kCorrupt);
  EXPECT_EQ((*r)->end_offset(), second);
  EXPECT_GT((*r)->resync_offset(), second);
}

// Golden files: tests/testdata/golden_v1.wal and golden_v1.vstore are produced by
// this deterministic workload (PION_WRITE_GOLDEN=1 rewrites them). The test checks
// that today's writer produces the same bytes and today's reader loads them.
void GoldenWorkload(Store& s) {
  uint64_t lsn = 0;
  for (size_t i = 0; i < std::size(kAllFormats); ++i)
    PION_CHECK(
        Fill(s, "g" + std::to_string(i), kAllFormats[i], 32, 2, 0, 3, 100 + i, &lsn, i == 0).ok());
  std::string_view drop[] = {"g2"};
  PION_CHECK(s.Drop(drop, &lsn).ok());
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(Golden, Version1FilesMatchAndLoad) {
  FaultEnv env;
  StoreDump want;
  std::vector<uint8_t> snap_bytes;
  {
    Node n(&env, SyncPolicy::kNo);
    ASSERT_TRUE(n.persist->Recover().ok());
    GoldenWorkload(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    Status st;
    auto views = n.store.CaptureSnapshot(nullptr, &st);
    SnapHeader h;
    h.generation = 1;
    h.next_lsn = n.persist->wal()->last_lsn() + 1;
    h.created_unix = 1767225600;  // fixed for reproducible bytes
    h.namespace_count = views.size();
    for (auto& v : views) h.lru_clock = std::max(h.lru_clock, v.lru_stamp);
    ASSERT_TRUE(WriteSnapshot(&env, "/db/golden.vstore", h, views, nullptr).ok());
  }
  auto wal = env.GetFile(kWal);
  auto snap = env.GetFile("/db/golden.vstore");
  const std::string dir = PION_TESTDATA_DIR;
  if (std::getenv("PION_WRITE_GOLDEN")) {
    std::ofstream(dir + "/golden_v1.wal", std::ios::binary)
        .write(reinterpret_cast<const char*>(wal.data()), static_cast<long>(wal.size()));
    std::ofstream(dir + "/golden_v1.vstore", std::ios::binary)
        .write(reinterpret_cast<const char*>(snap.data()), static_cast<long>(snap.size()));
  }
  auto gwal = ReadAll(dir + "/golden_v1.wal");
  auto gsnap = ReadAll(dir + "/golden_v1.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v1.wal";
  EXPECT_EQ(gwal, wal) << "WAL bytes changed: a format change needs a new version";
  EXPECT_EQ(gsnap, snap) << "snapshot bytes changed: a format change needs a new version";
  // The checked-in files load into the same state.
  FaultEnv env2;
  env2.SetFile(kWal, gwal);
  {
    Node m(&env2);
    ASSERT_TRUE(m.persist->Recover().ok());
    EXPECT_EQ(Dump(m.store), want);
  }
  FaultEnv env3;
  env3.SetFile(kSnap, gsnap);
  Node k(&env3);
  ASSERT_TRUE(k.persist->Recover().ok());
  EXPECT_EQ(Dump(k.store), want);
}

}  // namespace
}  // namespace pion::persist

namespace pion::persist {
namespace {

// Kernel-independent format stability: re-encoding the records of the golden
// WAL with today's writer, and re-writing the state loaded from the golden
// snapshot with today's snapshot writer, give the same bytes.
TEST(Golden, WriterReproducesGoldenBytesFromDecodedRecords) {
  const std::string dir = PION_TESTDATA_DIR;
  auto gwal = ReadAll(dir + "/golden_v1.wal");
  auto gsnap = ReadAll(dir + "/golden_v1.vstore");
  ASSERT_FALSE(gwal.empty());
  ASSERT_FALSE(gsnap.empty());
  FaultEnv env;
  env.SetFile("/g/in.wal", gwal);
  auto rd = WalReader::Open(&env, "/g/in.wal");
  ASSERT_TRUE(rd.ok());
  {
    WalWriter w(&env, "/g", SyncPolicy::kNo);
    ASSERT_TRUE(w.Create("out.wal", (*rd)->header().generation, (*rd)->header().first_lsn).ok());
    WalRecord rec;
    while ((*rd)->Next(&rec)) {
      switch (rec.type) {
        case RecordType::kRegister: {
          RegisterRec r;
          ASSERT_TRUE(DecodeRegister(rec.payload, &r).ok());
          store::BlockTable bt;
          if (r.has_blocks) {
            bt.block_size = r.block_size;
            bt.hashes.resize(r.hash_count);
            std::memcpy(bt.hashes.data(), r.hashes, r.hash_count * 8);
          }
          ASSERT_TRUE(
              w.OnRegister(r.ns, r.incarnation, r.kv_dim, r.fmt, r.has_blocks ? &bt : nullptr)
                  .ok());
          break;
        }
        case RecordType::kStore: {
          StoreRec r;
          ASSERT_TRUE(DecodeStore(rec.payload, &r).ok());
          ASSERT_TRUE(
              w.OnStore(r.ns, r.incarnation, r.side, r.layer, r.start, r.count, r.rows).ok());
          break;
        }
        case RecordType::kDrop: {
          DropRec r;
          ASSERT_TRUE(DecodeDrop(rec.payload, &r).ok());
          ASSERT_TRUE(w.OnDrop(r.ns, r.incarnation, r.reason).ok());
          break;
        }
        default:
          ASSERT_TRUE(w.OnFlushAll().ok());
      }
    }
    EXPECT_EQ((*rd)->end(), WalEnd::kClean);
  }
  EXPECT_EQ(env.GetFile("/g/out.wal"), gwal);

  // Snapshot: load, capture, write with the same header.
  env.SetFile("/g/in.vstore", gsnap);
  Store s(StoreConfig{});
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, "/g/in.vstore", &s, &st).ok());
  Status bs;
  auto views = s.CaptureSnapshot(nullptr, &bs);
  ASSERT_TRUE(WriteSnapshot(&env, "/g/out.vstore", st.header, views, nullptr).ok());
  EXPECT_EQ(env.GetFile("/g/out.vstore"), gsnap);
}

}  // namespace
}  // namespace pion::persist

namespace pion::persist {
namespace {

// Writers on several threads, group commit, and saves (compactions) running
// concurrently; after a clean close the recovered store equals the live one.
TEST(Concurrency, WritersAndSavesThenRecover) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env, SyncPolicy::kAlways);
    ASSERT_TRUE(n.persist->Recover().ok());
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    std::atomic<int> errors{0};
    for (int t = 0; t < 4; ++t) {
      th.emplace_back([&, t] {
        for (int i = 0; i < 30; ++i) {
          uint64_t lsn = 0;
          Status s = Fill(n.store, "t" + std::to_string(t) + "_" + std::to_string(i % 5),
                          kAllFormats[(t + i % 5) % 7], 64, 2, static_cast<uint64_t>(i) * 3, 3,
                          static_cast<uint64_t>(t * 100 + i), &lsn, i % 3 == 0);
          if (s.ok()) s = n.persist->WaitDurable(lsn);
          if (!s.ok()) errors++;
          if (i % 7 == 0) {
            std::string name = "t" + std::to_string(t) + "_" + std::to_string((i + 1) % 5);
            std::string_view names[] = {name};
            auto r = n.store.Drop(names, &lsn);
            if (!r.ok()) errors++;
          }
        }
      });
    }
    th.emplace_back([&] {
      while (!stop) {
        if (!n.persist->Save("").ok()) errors++;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    for (int t = 0; t < 4; ++t) th[t].join();
    stop = true;
    th.back().join();
    EXPECT_EQ(errors.load(), 0);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    EXPECT_GT(n.persist->Stats().saves, 0u);
  }
  Node m(&env);
  ASSERT_TRUE(m.persist->Recover().ok());
  EXPECT_EQ(Dump(m.store), want);
}

}  // namespace
}  // namespace pion::persist
