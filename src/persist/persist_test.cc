// Unit tests of the persistence layer on the fault-injecting Env: formats,
// WAL and snapshot round trips, recovery (torn tail, mid-file corruption,
// repair), full disk during append and save, golden files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "persist/persistence.h"
#include "persist/recovery.h"
#include "persist/snapshot.h"
#include "persist/testing/fault_env.h"
#include "persist/testing/test_util.h"
#include "persist/testing/wrapping_env.h"
#include "persist/wal_reader.h"
#include "persist/wal_writer.h"
#include "store/persist_adapter.h"

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
  explicit Node(Env* env, SyncPolicy p = SyncPolicy::kAlways, bool repair = false,
                bool recycle = true)
      : store(StoreConfig{}) {
    PersistOptions o;
    o.dir = kDir;
    o.env = env;
    o.policy = p;
    o.wal_repair = repair;
    o.wal_recycle = recycle;
    o.background = false;
    persist = std::make_unique<Persistence>(&store, o);
  }
  Store store;
  std::unique_ptr<Persistence> persist;
};

// A Node whose recovery must succeed (a failure fails the test).
struct RecoveredNode : Node {
  explicit RecoveredNode(Env* env, SyncPolicy p = SyncPolicy::kAlways, bool repair = false,
                         bool recycle = true)
      : Node(env, p, repair, recycle) {
    Status st = persist->Recover();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
};

// Runs `write` on a recovered node on `env`, closes it and recovers again: the
// store must come back as `write` left it. Returns the second node.
std::unique_ptr<RecoveredNode> WriteAndReopen(FaultEnv& env,
                                              const std::function<void(Node&)>& write) {
  StoreDump want;
  {
    RecoveredNode n(&env);
    write(n);
    want = Dump(n.store);
  }
  auto m = std::make_unique<RecoveredNode>(&env);
  EXPECT_EQ(Dump(m->store), want);
  return m;
}

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
  auto m = WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "ns" + std::to_string(i), kAllFormats[i], 64, 2, 0, 5, i, &lsn, i % 2 == 0)
              .ok());
    std::string_view names[] = {"ns1"};
    ASSERT_TRUE(n.store.Drop(names, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
  });
  EXPECT_EQ(m->persist->Stats().wal_replayed, 7u * 5 + 1);  // 7 x (register + 4 stores), 1 drop
}

TEST(Wal, FlushAllAndReRegisterReplay) {
  FaultEnv env;
  WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 8, 1, 0, 3, 1, &lsn).ok());
    ASSERT_TRUE(n.store.FlushAll(&lsn).ok());
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kInt8, 16, 1, 2, 3, 2, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
  });
}

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
  auto bt = m.store.Blocks("f0");
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

TEST(Recovery, SnapshotPlusWalAndLruOrder) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env);
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
    n.store.Lookup("b");
    n.store.Lookup("a");
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

// Issue 17 item 11: a failed append is cut off the file and, once space is
// free again, writes succeed without a restart.
TEST(FullDisk, WalAppendFailureIsCutAndWritesResume) {
  FaultEnv env;
  WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
    StoreDump before = Dump(n.store);
    env.FailNthWrite(1);
    store::RegisterArgs ra;
    ra.ns = "b";
    ra.kv_dim = 16;
    Status s = n.store.Register(ra, &lsn);
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_NE(s.message().find("No space left on device"), std::string::npos);
    EXPECT_EQ(Dump(n.store), before);          // nothing applied
    EXPECT_EQ(n.store.Lookup("a").hit, true);  // reads still served
    // The failed record was cut off: the next write succeeds.
    EXPECT_FALSE(n.persist->Stats().wal_broken);
    EXPECT_EQ(n.persist->Stats().wal_resumes, 1u);
    // A disk that stays full refuses every write cleanly, then space is freed.
    env.SetDiskFull(true);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(Fill(n.store, "c", quant::Format::kFp16, 16, 1, 0, 2, 3, &lsn).code(),
                Code::kIOError);
    env.SetDiskFull(false);
    ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp16, 16, 1, 0, 2, 3, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    EXPECT_FALSE(n.persist->Stats().wal_broken);
  });
}

// The error text names a file that exists: after a save the active WAL file
// was renamed from pion.vstore.wal.<G> to pion.vstore.wal.
TEST(FullDisk, ErrorNamesTheActiveWalFile) {
  FaultEnv env;
  RecoveredNode n(&env);
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  ASSERT_TRUE(n.persist->Save("").ok());
  env.SetDiskFull(true);
  Status s = Fill(n.store, "b", quant::Format::kFp16, 16, 1, 0, 4, 2, &lsn);
  env.SetDiskFull(false);
  ASSERT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("write " + kWal + ": No space left on device"), std::string::npos)
      << s.message();
  EXPECT_TRUE(env.FileExists(kWal));
  // (the WAL the save retired is kept for recycling, docs/wal_format.md §6)
  EXPECT_EQ(*env.ListDir(kDir),
            (std::vector<std::string>{"pion.vstore", "pion.vstore.wal", "pion.vstore.wal-spare"}));
}

// A failed SAVE leaves no pion.vstore.wal.<N> behind, however often it fails.
TEST(FullDisk, FailedSaveLeavesNoStrayWalFiles) {
  FaultEnv env;
  auto m = WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 512, 4, 0, 300, 1, &lsn).ok());
    ASSERT_TRUE(n.persist->Save("").ok());
    ASSERT_TRUE(Fill(n.store, "b", quant::Format::kInt8, 512, 4, 0, 300, 2, &lsn).ok());
    const std::vector<std::string> files = {"pion.vstore", "pion.vstore.wal",
                                            "pion.vstore.wal-spare"};
    for (int i = 0; i < 3; ++i) {
      env.SetDiskFull(true);  // the new WAL file's header cannot be written
      EXPECT_EQ(n.persist->Save("").code(), Code::kIOError);
      env.SetDiskFull(false);
      EXPECT_EQ(*env.ListDir(kDir), files) << i;
      env.FailNthWrite(2);  // header written, the snapshot fails
      EXPECT_EQ(n.persist->Save("").code(), Code::kIOError);
      EXPECT_EQ(*env.ListDir(kDir), files) << i;
    }
    EXPECT_EQ(n.persist->Stats().wal_generation, 2u);  // every rotation was undone
    ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp8, 64, 1, 0, 3, 3, &lsn).ok());
    ASSERT_TRUE(n.persist->Commit().ok());
  });
  ASSERT_TRUE(m->persist->Save("").ok());
  EXPECT_EQ(*env.ListDir(kDir),
            (std::vector<std::string>{"pion.vstore", "pion.vstore.wal", "pion.vstore.wal-spare"}));
  EXPECT_EQ(m->persist->wal()->Stats().recycled, 1u);  // the spare survived every failed save
}

TEST(FullDisk, SaveFailsAndLeavesPreviousStateReplayable) {
  for (uint64_t nth = 1; nth <= 4; ++nth) {
    FaultEnv env;
    std::vector<uint8_t> old_snap;
    auto m = WriteAndReopen(env, [&](Node& n) {
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
    });
    // A later save succeeds and compacts every older WAL file.
    ASSERT_TRUE(m->persist->Save("").ok());
    auto names = *env.ListDir(kDir);
    EXPECT_EQ(names, (std::vector<std::string>{"pion.vstore", "pion.vstore.wal",
                                               "pion.vstore.wal-spare"}));
  }
}

// After a failed fdatasync the kernel may have dropped pages: the WAL refuses
// writes until a snapshot holds everything; then writes resume without a
// restart, and replies held meanwhile are released.
TEST(FullDisk, SyncFailureRefusesWritesUntilASnapshot) {
  FaultEnv env;
  WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    env.FailNthSync(1);
    store::RegisterArgs ra;
    ra.ns = "b";
    ra.kv_dim = 16;
    ASSERT_TRUE(n.store.Register(ra, &lsn).ok());
    const uint64_t held = lsn;
    EXPECT_EQ(n.persist->WaitDurable(held).code(), Code::kIOError);
    Status s = n.store.Register(ra, &lsn);
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_NE(s.message().find("until a snapshot"), std::string::npos) << s.message();
    EXPECT_TRUE(n.store.Lookup("a").hit);
    EXPECT_TRUE(n.persist->Stats().wal_broken);
    ASSERT_TRUE(n.persist->Save("").ok());
    EXPECT_FALSE(n.persist->Stats().wal_broken);
    EXPECT_TRUE(n.persist->WaitDurable(held).ok());  // "b" is in the durable snapshot
    ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp16, 16, 1, 0, 2, 3, &lsn).ok());
    ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
    EXPECT_EQ(*env.ListDir(kDir), (std::vector<std::string>{"pion.vstore", "pion.vstore.wal",
                                                            "pion.vstore.wal-spare"}));
  });
}

// The automatic snapshot heals a broken WAL, and backs off on a full disk:
// 1 s, 2 s, 4 s ... (tests drive its clock).
TEST(FullDisk, AutoSaveHealsAndBacksOff) {
  FaultEnv env;
  RecoveredNode n(&env);
  EXPECT_EQ(n.persist->AutoSaveBackoffMs(1), 1000u);
  EXPECT_EQ(n.persist->AutoSaveBackoffMs(3), 4000u);
  EXPECT_EQ(n.persist->AutoSaveBackoffMs(40), 300000u);
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(n.store, "a", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  EXPECT_FALSE(n.persist->AutoSaveTick(0));  // small, healthy WAL: nothing to do
  ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
  env.FailNthSync(1);
  store::RegisterArgs ra;
  ra.ns = "b";
  ra.kv_dim = 16;
  ASSERT_TRUE(n.store.Register(ra, &lsn).ok());
  ASSERT_EQ(n.persist->WaitDurable(lsn).code(), Code::kIOError);
  env.SetDiskFull(true);
  uint64_t t = 10000;
  EXPECT_TRUE(n.persist->AutoSaveTick(t));  // fails: 1 s back-off
  EXPECT_FALSE(n.persist->AutoSaveTick(t + 999));
  EXPECT_TRUE(n.persist->AutoSaveTick(t += 1000));  // fails: 2 s
  EXPECT_FALSE(n.persist->AutoSaveTick(t + 1999));
  EXPECT_TRUE(n.persist->AutoSaveTick(t += 2000));  // fails: 4 s
  EXPECT_FALSE(n.persist->AutoSaveTick(t + 3999));
  EXPECT_EQ(n.persist->Stats().auto_save_failures, 3u);
  EXPECT_EQ(n.persist->Stats().auto_save_attempts, 3u);
  EXPECT_TRUE(n.persist->Stats().wal_broken);
  EXPECT_EQ(*env.ListDir(kDir), (std::vector<std::string>{"pion.vstore.wal"}));
  env.SetDiskFull(false);
  EXPECT_TRUE(n.persist->AutoSaveTick(t += 4000));  // succeeds: the WAL is whole again
  EXPECT_EQ(n.persist->Stats().auto_save_failures, 0u);
  EXPECT_FALSE(n.persist->Stats().wal_broken);
  ASSERT_TRUE(Fill(n.store, "c", quant::Format::kFp16, 16, 1, 0, 4, 3, &lsn).ok());
  ASSERT_TRUE(n.persist->WaitDurable(lsn).ok());
  EXPECT_FALSE(n.persist->AutoSaveTick(t + 1));
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

// Version 1 files (written before string keys existed) still load into the
// state of the workload that produced them.
TEST(Golden, Version1FilesLoad) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env, SyncPolicy::kNo);
    ASSERT_TRUE(n.persist->Recover().ok());
    GoldenWorkload(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  const std::string dir = PION_TESTDATA_DIR;
  auto gwal = ReadAll(dir + "/golden_v1.wal");
  auto gsnap = ReadAll(dir + "/golden_v1.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v1.wal";
  ASSERT_EQ(GetU32(gwal.data() + 8), 1u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 1u);
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

// Version 2: the namespace workload plus every kind of string record (SET with
// and without expiry, APPEND, EXPIRE, PERSIST, RENAME, DEL). Expiry times are
// absolute and far in the future so the files stay valid.
constexpr int64_t kGoldenExpireMs = 4102444800000;  // 2100-01-01
void GoldenWorkloadV2(Store& s) {
  GoldenWorkload(s);
  uint64_t lsn = 0;
  auto set = [&](std::string_view k, std::string_view v, int64_t exp) {
    store::SetOptions o;
    o.expire_at_ms = exp;
    PION_CHECK(s.StrSet(k, store::StrValue::Copy(v), o, &lsn).ok());
  };
  set("s:plain", "hello", 0);
  set("s:ttl", std::string(300, 'x'), kGoldenExpireMs);
  set("s:empty", "", 0);
  set("s:gone", "bye", 0);
  set("s:moved", "value that moves", kGoldenExpireMs + 1000);
  PION_CHECK(s.StrAppend("s:plain", " world", &lsn).ok());
  PION_CHECK(s.Expire("s:plain", kGoldenExpireMs + 5, store::ExpireCond::kAlways, &lsn).ok());
  PION_CHECK(s.Persist("s:plain", &lsn).ok());
  bool done = false;
  PION_CHECK(s.Rename("s:moved", "s:dest", false, &done, &lsn).ok());
  std::string_view del[] = {"s:gone"};
  PION_CHECK(s.KeysDelete(del, &lsn).ok());
}

// Version 2 files (written before lineage links existed) still load into the
// state of the workload that produced them.
TEST(Golden, Version2FilesLoad) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env, SyncPolicy::kNo);
    ASSERT_TRUE(n.persist->Recover().ok());
    GoldenWorkloadV2(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  ASSERT_EQ(want.count("string:s:plain"), 1u);
  EXPECT_EQ(want["string:s:plain"], "exp=0 hello world");
  EXPECT_EQ(want.count("string:s:gone"), 0u);
  EXPECT_EQ(want.count("string:s:moved"), 0u);
  EXPECT_EQ(want["string:s:dest"],
            "exp=" + std::to_string(kGoldenExpireMs + 1000) + " value that moves");
  const std::string dir = PION_TESTDATA_DIR;
  auto gwal = ReadAll(dir + "/golden_v2.wal");
  auto gsnap = ReadAll(dir + "/golden_v2.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v2.wal";
  ASSERT_EQ(GetU32(gwal.data() + 8), 2u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 2u);
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

// Version 3: the version 2 workload plus lineage: a chain root <- c1 <- c2 (c1
// with a block table), a sibling c1b, a re-registration of c1 (a plain
// REGISTER), a subtree drop (c1b's own child with it) and a chain of another
// format.
void GoldenWorkloadV3(Store& s) {
  GoldenWorkloadV2(s);
  uint64_t lsn = 0;
  auto child = [&](const std::string& ns, const char* parent, quant::Format f, uint64_t seed,
                   bool blocks) {
    store::RegisterArgs ra;
    ra.ns = ns;
    ra.kv_dim = 32;
    ra.fmt = f;
    ra.parent = parent;
    auto bt = std::make_shared<store::BlockTable>();
    if (blocks) {
      bt->block_size = 16;
      for (uint64_t i = 0; i < 3; ++i) bt->hashes.push_back(seed * 7 + i);
      bt->Finish();
      ra.blocks = bt;
    }
    uint64_t l = 0;
    PION_CHECK(s.Register(ra, &l).ok());
    // Rows: register again without PARENT is what Fill does (keeps the link).
    PION_CHECK(Fill(s, ns, f, 32, 1, 0, 2, seed, &lsn, false).ok());
  };
  PION_CHECK(Fill(s, "chain:root", quant::Format::kFp16, 32, 1, 0, 4, 500, &lsn, false).ok());
  child("chain:c1", "chain:root", quant::Format::kFp16, 501, true);
  child("chain:c2", "chain:c1", quant::Format::kInt8, 502, false);
  child("chain:c1b", "chain:root", quant::Format::kFp16, 503, false);
  child("chain:c1b:x", "chain:c1b", quant::Format::kFp16, 504, false);
  std::string_view drop[] = {"chain:c1b"};
  PION_CHECK(s.Drop(drop, &lsn).ok());  // two DROP records, leaf first
  PION_CHECK(Fill(s, "other:root", quant::Format::kTurbo4, 32, 1, 0, 2, 505, &lsn, false).ok());
  child("other:t1", "other:root", quant::Format::kTurbo4, 506, false);
}

TEST(Golden, Version3WalAndVersion4SnapshotMatchAndLoad) {
  FaultEnv env;
  StoreDump want;
  {
    Node n(&env, SyncPolicy::kNo);
    ASSERT_TRUE(n.persist->Recover().ok());
    GoldenWorkloadV3(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    Status st;
    auto views = n.store.CaptureSnapshot(nullptr, &st);
    auto strings = MakePersistHost(&n.store)->TakeCapturedStrings();
    SnapHeader h;
    h.generation = 1;
    h.next_lsn = n.persist->wal()->last_lsn() + 1;
    h.created_unix = 1767225600;  // fixed for reproducible bytes
    h.namespace_count = views.size();
    for (auto& v : views) h.lru_clock = std::max(h.lru_clock, v.lru_stamp);
    for (auto& k : strings) h.lru_clock = std::max(h.lru_clock, k.lru_stamp);
    ASSERT_TRUE(WriteSnapshot(&env, "/db/golden.vstore", h, views, nullptr, &strings).ok());
  }
  ASSERT_EQ(want.count("chain:c2"), 1u);
  EXPECT_NE(want["chain:c2"].find(" parent=chain:c1/"), std::string::npos);
  EXPECT_NE(want["chain:c1"].find(" parent=chain:root/"), std::string::npos);
  EXPECT_EQ(want["chain:root"].find(" parent="), std::string::npos);
  EXPECT_EQ(want.count("chain:c1b"), 0u);
  EXPECT_EQ(want.count("chain:c1b:x"), 0u);
  EXPECT_EQ(want.count("string:s:plain"), 1u);
  auto wal = env.GetFile(kWal);
  auto snap = env.GetFile("/db/golden.vstore");
  const std::string dir = PION_TESTDATA_DIR;
  // Writers are at WAL version 4 and snapshot version 5 since golden_v4.wal and
  // golden_v5.vstore (block_persist_test.cc), which add records and sections
  // this workload does not write: today's bytes equal these files' after the
  // file header (whose version field, and so its CRC, differs), and the version
  // 3 snapshot of the same workload still loads.
  auto gwal = ReadAll(dir + "/golden_v3.wal");
  auto gsnap3 = ReadAll(dir + "/golden_v3.vstore");
  auto gsnap = ReadAll(dir + "/golden_v4.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v3.wal";
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v4.vstore";
  ASSERT_EQ(GetU32(gwal.data() + 8), 3u);
  ASSERT_EQ(GetU32(gsnap3.data() + 8), 3u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 4u);
  ASSERT_GE(wal.size(), kWalHeaderSize);
  ASSERT_GE(snap.size(), kSnapHeaderSize);
  EXPECT_EQ(GetU32(wal.data() + 8), kWalVersion);
  EXPECT_EQ(GetU32(snap.data() + 8), kSnapVersion);
  EXPECT_TRUE(std::equal(gwal.begin() + kWalHeaderSize, gwal.end(), wal.begin() + kWalHeaderSize,
                         wal.end()))
      << "WAL bytes changed: a format change needs a new version";
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         snap.begin() + kSnapHeaderSize, snap.end()))
      << "snapshot bytes changed: a format change needs a new version";
  FaultEnv env2;
  env2.SetFile(kWal, gwal);
  {
    Node m(&env2);
    ASSERT_TRUE(m.persist->Recover().ok());
    EXPECT_EQ(Dump(m.store), want);
  }
  for (const auto* g : {&gsnap3, &gsnap})
    for (bool mappable : {true, false}) {
      FaultEnv env3;
      env3.SetMappable(mappable);
      env3.SetFile(kSnap, *g);
      Node k(&env3);
      ASSERT_TRUE(k.persist->Recover().ok());
      EXPECT_EQ(Dump(k.store), want);
      EXPECT_EQ(k.persist->Stats().snapshot_mapped, mappable);
    }
}

// A NAMESPACE_CHILD section whose parent was not declared before it (or with
// another incarnation or kv_dim) makes the snapshot corrupt.
TEST(Golden, ChildSectionBeforeItsParentIsCorrupt) {
  auto view = [](const char* ns, uint64_t inc, const char* parent, uint64_t pinc, uint32_t dim) {
    SnapshotNamespace v;
    v.ns = ns;
    v.kv_dim = dim;
    v.incarnation = inc;
    v.parent = parent;
    v.parent_incarnation = pinc;
    return v;
  };
  struct Case {
    std::vector<SnapshotNamespace> views;
    bool ok;
  };
  std::vector<Case> cases;
  cases.push_back({{view("p", 1, "", 0, 32), view("c", 2, "p", 1, 32)}, true});
  cases.push_back({{view("c", 2, "p", 1, 32), view("p", 1, "", 0, 32)}, false});
  cases.push_back({{view("p", 1, "", 0, 32), view("c", 2, "p", 5, 32)}, false});
  cases.push_back({{view("p", 1, "", 0, 32), view("c", 2, "p", 1, 64)}, false});
  for (size_t i = 0; i < cases.size(); ++i) {
    FaultEnv env;
    SnapHeader h;
    h.generation = 1;
    h.namespace_count = 2;
    ASSERT_TRUE(WriteSnapshot(&env, "/db/x.vstore", h, cases[i].views, nullptr, nullptr).ok());
    Store s(StoreConfig{});
    SnapshotStats st;
    Status r = LoadSnapshot(&env, "/db/x.vstore", &s, &st);
    EXPECT_EQ(r.ok(), cases[i].ok) << i << ": " << r.message();
    if (!cases[i].ok) {
      EXPECT_NE(r.message().find("child namespace before (or unlike) its parent"),
                std::string_view::npos);
    }
  }
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
  auto gwal = ReadAll(dir + "/golden_v3.wal");
  auto gsnap = ReadAll(dir + "/golden_v4.vstore");
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
        case RecordType::kRegisterChild: {
          RegisterRec r;
          ASSERT_TRUE(DecodeRegisterChild(rec.payload, &r).ok());
          std::shared_ptr<store::BlockTable> bt;
          if (r.has_blocks) {
            bt = std::make_shared<store::BlockTable>();
            bt->block_size = r.block_size;
            bt->hashes.resize(r.hash_count);
            std::memcpy(bt->hashes.data(), r.hashes, r.hash_count * 8);
          }
          PendingRecord p;
          ASSERT_TRUE(w.ReserveRegisterChild(r.ns, r.incarnation, r.kv_dim, r.fmt, bt, r.parent,
                                             r.parent_incarnation, &p)
                          .ok());
          std::span<const uint8_t> body;
          if (bt)
            body = {reinterpret_cast<const uint8_t*>(bt->hashes.data()), bt->hashes.size() * 8};
          ASSERT_TRUE(p.write(body).ok());
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
        case RecordType::kStrSet: {
          StrSetRec r;
          ASSERT_TRUE(DecodeStrSet(rec.payload, false, &r).ok());
          PendingRecord p;
          ASSERT_TRUE(w.ReserveStrSet(r.key, r.expire_at_ms, r.value.size(), &p).ok());
          ASSERT_TRUE(p.write(r.value).ok());
          break;
        }
        case RecordType::kStrDel: {
          StrKeyRec r;
          ASSERT_TRUE(DecodeStrDel(rec.payload, &r).ok());
          ASSERT_TRUE(w.OnStrDel(r.key, r.reason).ok());
          break;
        }
        case RecordType::kStrExpire: {
          StrKeyRec r;
          ASSERT_TRUE(DecodeStrExpire(rec.payload, &r).ok());
          ASSERT_TRUE(w.OnStrExpire(r.key, r.expire_at_ms).ok());
          break;
        }
        case RecordType::kStrRename: {
          StrKeyRec r;
          ASSERT_TRUE(DecodeStrRename(rec.payload, &r).ok());
          ASSERT_TRUE(w.OnStrRename(r.key, r.dst).ok());
          break;
        }
        default:
          ASSERT_TRUE(w.OnFlushAll().ok());
      }
    }
    EXPECT_EQ((*rd)->end(), WalEnd::kClean);
  }
  // The same records; only the file header's version (and CRC) is today's.
  auto out_wal = env.GetFile("/g/out.wal");
  ASSERT_GE(out_wal.size(), kWalHeaderSize);
  EXPECT_TRUE(std::equal(gwal.begin() + kWalHeaderSize, gwal.end(),
                         out_wal.begin() + kWalHeaderSize, out_wal.end()));

  // Snapshot: load, capture, write with the same header.
  env.SetFile("/g/in.vstore", gsnap);
  Store s(StoreConfig{});
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, "/g/in.vstore", &s, &st).ok());
  Status bs;
  auto views = s.CaptureSnapshot(nullptr, &bs);
  auto strings = MakePersistHost(&s)->TakeCapturedStrings();
  ASSERT_TRUE(WriteSnapshot(&env, "/g/out.vstore", st.header, views, nullptr, &strings).ok());
  auto out_snap = env.GetFile("/g/out.vstore");
  ASSERT_GE(out_snap.size(), kSnapHeaderSize);
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         out_snap.begin() + kSnapHeaderSize, out_snap.end()));
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
    RecoveredNode n(&env, SyncPolicy::kAlways);
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
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
}

}  // namespace
}  // namespace pion::persist

namespace pion::persist {
namespace {

// An Env that forwards to a FaultEnv and lets a test intercept every write of a
// writable file: delay it, block it on a latch, fail it, or note its completion.
class HookEnv final : public WrappingEnv {
 public:
  // Called instead of the write; `inner` performs it.
  using Hook =
      std::function<Status(uint64_t off, std::span<const uint8_t> data, WritableFile* inner)>;
  explicit HookEnv(FaultEnv* base) : WrappingEnv(base) {}
  Hook hook;

 private:
  class File final : public ForwardingFile {
   public:
    File(HookEnv* env, std::unique_ptr<WritableFile> f) : ForwardingFile(std::move(f)), env_(env) {}
    Status WriteAt(uint64_t off, std::span<const uint8_t> data) override {
      if (env_->hook) return env_->hook(off, data, inner());
      return inner()->WriteAt(off, data);
    }

   private:
    HookEnv* env_;
  };
  std::unique_ptr<WritableFile> Wrap(std::unique_ptr<WritableFile> f) override {
    return std::make_unique<File>(this, std::move(f));
  }
};

// The LSN of a record header at the start of `data`, or 0 if `data` is not one
// (test rows are filled with 0xAB, never a valid type byte).
uint64_t HeaderLsn(std::span<const uint8_t> data) {
  if (data.size() < kRecordHeaderSize || data[8] < 1 || data[8] > 4 || data[9] != 0 ||
      data[10] != 0 || data[11] != 0)
    return 0;
  return GetU64(data.data() + 12);
}

// A one-shot latch: Wait() blocks until Open(); AwaitEntered() until a
// thread is in Wait().
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  void Wait() {
    std::unique_lock<std::mutex> l(mu);
    entered = true;
    cv.notify_all();
    cv.wait(l, [&] { return open; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu);
    open = true;
    cv.notify_all();
  }
  void AwaitEntered() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return entered; });
  }
};

// Many threads append records of mixed sizes (64 B .. 256 KiB) whose writes
// finish out of order; every ack (appended LSN under `no`, durable LSN under
// `always`) only covers LSNs whose records, and all before them, were fully
// written; LSNs are dense, per-thread increasing, and the file reads back clean.
// Stores to the same rows of one side from several threads, with saves in
// between: their records are written concurrently and outside the store's
// locks, yet they apply in LSN order, so replay (snapshot + WAL) rebuilds
// exactly the bytes the live store ended with.
TEST(Concurrency, OverlappingStoresToOneSideReplayExactly) {
  FaultEnv env;
  StoreDump want;
  {
    RecoveredNode n(&env, SyncPolicy::kNo);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(n.store, "s", quant::Format::kInt8, 64, 2, 0, 1, 1, &lsn).ok());
    std::atomic<int> errors{0};
    std::vector<std::thread> th;
    for (int t = 0; t < 4; ++t) {
      th.emplace_back([&, t] {
        std::mt19937 rng(t);
        std::normal_distribution<float> nd;
        for (int i = 0; i < 150; ++i) {
          uint64_t start = rng() % 48, count = 1 + rng() % (i % 10 == 0 ? 600 : 40);
          std::vector<float> rows(count * 64);
          for (auto& x : rows) x = nd(rng);
          uint64_t l = 0;
          Status s =
              n.store.StoreRows(i % 2 ? "s_pk" : "s_pv", rng() % 2, start, count,
                                {store::RowInput::Type::kF32, rows.data(), rows.size() * 4}, &l);
          if (!s.ok()) errors++;
          if (t == 0 && i % 50 == 25 && !n.persist->Save("").ok()) errors++;
        }
      });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  RecoveredNode m(&env);
  EXPECT_EQ(Dump(m.store), want);
}

TEST(ConcurrentAppend, MixedSizesAcksCoverOnlyTheContiguousPrefix) {
  for (SyncPolicy policy : {SyncPolicy::kNo, SyncPolicy::kAlways}) {
    FaultEnv base;
    HookEnv env(&base);
    std::mutex mu;
    std::set<uint64_t> written;  // LSNs whose header write (the last one) finished
    uint64_t contiguous = 0;
    std::atomic<int> bad_acks{0};
    std::atomic<uint64_t> max_ack{0};
    std::atomic<uint64_t> rnd{12345};
    env.hook = [&](uint64_t off, std::span<const uint8_t> data, WritableFile* f) {
      uint64_t r = rnd.fetch_add(0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
      if (data.size() > 1024 || r % 5 == 0)
        std::this_thread::sleep_for(std::chrono::microseconds((r >> 40) % 1500));
      Status s = f->WriteAt(off, data);
      uint64_t lsn = HeaderLsn(data);
      if (s.ok() && lsn != 0) {
        std::lock_guard<std::mutex> l(mu);
        written.insert(lsn);
        while (written.count(contiguous + 1)) ++contiguous;
      }
      return s;
    };
    constexpr int kThreads = 8, kPer = 60;
    std::vector<std::vector<uint64_t>> got(kThreads);
    {
      WalWriter w(&env, kDir, policy);
      ASSERT_TRUE(w.Create("pion.vstore.wal", 1, 1).ok());
      w.SetAckCallback([&](uint64_t v) {
        std::lock_guard<std::mutex> l(mu);
        if (v > contiguous) bad_acks++;
        uint64_t cur = max_ack.load();
        while (cur < v && !max_ack.compare_exchange_weak(cur, v)) {
        }
      });
      if (policy == SyncPolicy::kAlways) w.Start();
      std::vector<std::thread> th;
      for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
          for (int i = 0; i < kPer; ++i) {
            Result<uint64_t> r = uint64_t{0};
            if ((i + t) % 4 == 0) {
              r = w.OnDrop("ns" + std::to_string(t), 1, store::DropReason::kDrop);
            } else {
              size_t rows = size_t{1} << ((i * 7 + t) % 13);  // 1 .. 4096 rows of 64 B
              std::vector<uint8_t> v(rows * 64, 0xAB);
              r = w.OnStore("ns" + std::to_string(t), 1, store::Side::kKeys, 0,
                            static_cast<uint64_t>(i), rows, v);
            }
            ASSERT_TRUE(r.ok()) << r.status().ToString();
            got[t].push_back(*r);
          }
        });
      }
      for (auto& x : th) x.join();
      ASSERT_TRUE(w.Commit().ok());
      EXPECT_EQ(w.last_lsn(), uint64_t{kThreads * kPer});
      EXPECT_EQ(w.durable_lsn(), uint64_t{kThreads * kPer});
    }
    EXPECT_EQ(bad_acks.load(), 0) << static_cast<int>(policy);
    EXPECT_EQ(max_ack.load(), uint64_t{kThreads * kPer}) << static_cast<int>(policy);
    std::set<uint64_t> all;
    for (auto& v : got) {
      EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
      all.insert(v.begin(), v.end());
    }
    ASSERT_EQ(all.size(), size_t{kThreads * kPer});
    EXPECT_EQ(*all.begin(), 1u);
    EXPECT_EQ(*all.rbegin(), uint64_t{kThreads * kPer});
    auto rd = WalReader::Open(&base, kWal);
    ASSERT_TRUE(rd.ok());
    WalRecord rec;
    uint64_t n = 0;
    while ((*rd)->Next(&rec)) EXPECT_EQ(rec.lsn, ++n);
    EXPECT_EQ(n, uint64_t{kThreads * kPer});
    EXPECT_EQ((*rd)->end(), WalEnd::kClean);
  }
}

// The write of a middle record fails (ENOSPC) while the record after it has
// already been written and one more is still being written: the failed append
// and the one in flight after it get an error, nothing from the failed record
// on is ever acknowledged, later appends are refused, and once the writes in
// flight finished the file is cut at the failed record (no gap followed by
// valid records). A restart recovers the prefix and accepts writes again.
TEST(ConcurrentAppend, FailedMiddleRecordIsNeverAcknowledged) {
  FaultEnv base;
  HookEnv env(&base);
  constexpr size_t kBigA = 3125 * 32, kBigC = 1000 * 32;  // fp16, kv_dim 16: 32 B rows
  Latch la, lc;
  env.hook = [&](uint64_t off, std::span<const uint8_t> data, WritableFile* f) -> Status {
    if (data.size() == kBigA) {
      la.Wait();
      (void)f->WriteAt(off, data.subspan(0, data.size() / 2));  // a partial write
      return Status::IOError("write: No space left on device");
    }
    if (data.size() == kBigC) lc.Wait();
    return f->WriteAt(off, data);
  };
  std::mutex mu;
  std::vector<uint64_t> acks;
  uint64_t off_a = 0;
  {
    WalWriter w(&env, kDir, SyncPolicy::kNo);
    ASSERT_TRUE(w.Create("pion.vstore.wal", 1, 1).ok());
    w.SetAckCallback([&](uint64_t v) {
      std::lock_guard<std::mutex> l(mu);
      acks.push_back(v);
    });
    ASSERT_EQ(*w.OnRegister("ns", 1, 16, quant::Format::kFp16, nullptr), 1u);
    off_a = w.Stats().bytes;
    std::vector<uint8_t> a(kBigA, 0xAB), c(kBigC, 0xAB);
    Result<uint64_t> ra = uint64_t{0}, rc = uint64_t{0};
    std::thread ta(
        [&] { ra = w.OnStore("ns", 1, store::Side::kKeys, 0, 0, kBigA / 32, a); });  // lsn 2
    la.AwaitEntered();
    // lsn 3: written completely while lsn 2 is still being written.
    auto rb = w.OnDrop("other", 7, store::DropReason::kDrop);
    ASSERT_TRUE(rb.ok());
    EXPECT_EQ(*rb, 3u);
    std::thread tc(
        [&] { rc = w.OnStore("ns", 1, store::Side::kValues, 0, 0, kBigC / 32, c); });  // lsn 4
    lc.AwaitEntered();
    EXPECT_EQ(w.last_lsn(), 1u);  // 3 is written but 2 is not
    la.Open();
    ta.join();
    EXPECT_EQ(ra.status().code(), Code::kIOError);
    EXPECT_NE(ra.status().message().find("No space left on device"), std::string::npos);
    EXPECT_EQ(w.OnFlushAll().status().code(), Code::kIOError);  // refused: broken
    lc.Open();
    tc.join();
    EXPECT_EQ(rc.status().code(), Code::kIOError);  // written after the failure: refused
    EXPECT_EQ(w.last_lsn(), 1u);
    EXPECT_TRUE(w.Stats().broken);
    EXPECT_EQ(w.Commit().code(), Code::kIOError);
  }
  for (uint64_t v : acks) EXPECT_LE(v, 1u);
  EXPECT_EQ(base.GetFile(kWal).size(), off_a);  // cut at the failed record
  auto rd = WalReader::Open(&base, kWal);
  ASSERT_TRUE(rd.ok());
  WalRecord rec;
  int n = 0;
  while ((*rd)->Next(&rec)) ++n;
  EXPECT_EQ(n, 1);
  EXPECT_EQ((*rd)->end(), WalEnd::kClean);
  RecoveredNode m(&base);
  EXPECT_EQ(m.store.NamespaceCount(), 1u);
  EXPECT_EQ(m.persist->wal()->last_lsn(), 1u);
  uint64_t lsn = 0;
  ASSERT_TRUE(Fill(m.store, "z", quant::Format::kFp16, 16, 1, 0, 2, 5, &lsn).ok());
  ASSERT_TRUE(m.persist->WaitDurable(lsn).ok());
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
  return s.StoreRows(side_key, 0, start, rows, in, lsn);
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

// Reader rule (docs/wal_format.md §5): a bad record whose header is not zero
// and that is followed by a valid record is still corruption.
TEST(WalReader, GarbageFollowedByRecordIsCorruptButHoleIsTorn) {
  FaultEnv env;
  uint64_t size = 0;
  WriteThree(env, &size);
  auto good = env.GetFile(kWal);
  uint64_t second = 40 + 20 + GetU32(good.data() + 40 + 4);
  for (bool zero : {true, false}) {
    auto b = good;
    std::fill(b.begin() + static_cast<long>(second), b.begin() + static_cast<long>(second) + 20,
              zero ? 0 : 0x5A);
    env.SetFile(kWal, b);
    auto r = WalReader::Open(&env, kWal);
    ASSERT_TRUE(r.ok());
    WalRecord rec;
    int n = 0;
    while ((*r)->Next(&rec)) ++n;
    EXPECT_EQ(n, 1);
    EXPECT_EQ((*r)->end(), zero ? WalEnd::kTorn : WalEnd::kCorrupt);
    EXPECT_EQ((*r)->end_offset(), second);
  }
}

}  // namespace
}  // namespace pion::persist

namespace pion::persist {
namespace {

// How many of a layer's fetched rows lie inside [lo, hi) (a mapping).
uint64_t RowsInside(Store& s, const std::string& sid, uint32_t layer, uint64_t end,
                    std::pair<const uint8_t*, const uint8_t*> range) {
  auto plan = s.FetchRange(sid, layer, 0, end);
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
    ASSERT_TRUE(m.store.Drop(names, &lsn).ok());
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

// WAL preallocation (wal-preallocate-bytes, docs/wal_format.md §6) on the real
// filesystem: disk space is kept reserved ahead of the log's end while the
// file's size stays the bytes written, the log recovers bit-exact, appends
// continue after a restart, and a log whose tail was preallocated when the
// process died (space past the end, or the end itself extended with zeros by a
// size-changing allocation) still loads with nothing lost.
TEST(WalPreallocation, SpaceAheadOfTheEndAndLogsStillLoad) {
  std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") +
                     "/pion-prealloc-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  {  // Does this filesystem preallocate at all?
    auto f = PosixEnv()->NewWritableFile(dir + "/probe");
    ASSERT_TRUE(f.ok());
    Status s = (*f)->Preallocate(0, 4096);
    (void)(*f)->Close();
    ASSERT_TRUE(PosixEnv()->RemoveFile(dir + "/probe").ok());
    if (s.code() == Code::kNotSupported) GTEST_SKIP() << "no fallocate here";
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  constexpr uint64_t kStep = 1 << 20;
  auto open_node = [&](Store* store) {
    PersistOptions o;
    o.dir = dir;
    o.env = PosixEnv();
    o.policy = SyncPolicy::kAlways;
    o.background = false;
    o.wal_preallocate_bytes = kStep;
    auto p = std::make_unique<Persistence>(store, o);
    Status st = p->Recover();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return p;
  };
  const std::string wal = dir + "/pion.vstore.wal";
  auto stat_wal = [&](struct stat* st) { ASSERT_EQ(::stat(wal.c_str(), st), 0); };
  StoreDump want;
  {
    Store store(StoreConfig{});
    auto p = open_node(&store);
    uint64_t lsn = 0;
    // 2 KiB rows x 1200 x 2 layers: ~4.7 MiB in records of 256 rows, several top-ups.
    for (uint64_t at = 0; at < 1200; at += 256)
      ASSERT_TRUE(Fill(store, "p", quant::Format::kFp16, 1024, 2, at, 256, 3 + at, &lsn).ok());
    ASSERT_TRUE(p->Commit().ok());
    want = Dump(store);
    struct stat st;
    stat_wal(&st);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), p->Stats().wal_bytes);
    // Reserved space past the end: more blocks than the size needs.
    EXPECT_GT(static_cast<uint64_t>(st.st_blocks) * 512,
              static_cast<uint64_t>(st.st_size) + kStep / 4);
    ASSERT_TRUE(p->Close().ok());
  }
  {
    Store store(StoreConfig{});
    auto p = open_node(&store);
    EXPECT_EQ(Dump(store), want);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(store, "q", quant::Format::kInt8, 64, 1, 0, 100, 9, &lsn).ok());
    ASSERT_TRUE(p->Commit().ok());
    want = Dump(store);
    ASSERT_TRUE(p->Close().ok());
  }
  struct stat before;
  stat_wal(&before);
  // Death right after a top-up: reserved space past the end only.
  {
    int fd = ::open(wal.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, before.st_size, 4 * kStep), 0);
    ::close(fd);
    Store store(StoreConfig{});
    auto p = open_node(&store);
    EXPECT_EQ(Dump(store), want);
    ASSERT_TRUE(p->Close().ok());
  }
  // A tail of zeros inside the file's size (a size-changing allocation, or
  // space whose records were never written): end of the log, cut off.
  {
    struct stat now;
    stat_wal(&now);
    int fd = ::open(wal.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, 0, now.st_size, kStep), 0);
    ::close(fd);
    stat_wal(&now);
    ASSERT_GT(now.st_size, before.st_size);
    Store store(StoreConfig{});
    auto p = open_node(&store);
    EXPECT_EQ(Dump(store), want);
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(store, "r", quant::Format::kInt8, 64, 1, 0, 10, 11, &lsn).ok());
    ASSERT_TRUE(p->Commit().ok());
    want = Dump(store);
    ASSERT_TRUE(p->Close().ok());
  }
  {
    Store store(StoreConfig{});
    auto p = open_node(&store);
    EXPECT_EQ(Dump(store), want);
    ASSERT_TRUE(p->Close().ok());
  }
  auto names = PosixEnv()->ListDir(dir);
  ASSERT_TRUE(names.ok());
  for (const auto& n : *names) (void)PosixEnv()->RemoveFile(dir + "/" + n);
  ::rmdir(dir.c_str());
}

// An Env whose Sync blocks on a latch while `hold` is set.
class SyncGateEnv final : public WrappingEnv {
 public:
  explicit SyncGateEnv(FaultEnv* base) : WrappingEnv(base) {}
  std::atomic<bool> hold{false};
  std::atomic<int> syncs{0};
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;

  void AwaitEntered() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return entered; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu);
    open = true;
    cv.notify_all();
  }

 private:
  class File final : public ForwardingFile {
   public:
    File(SyncGateEnv* env, std::unique_ptr<WritableFile> f)
        : ForwardingFile(std::move(f)), env_(env) {}
    Status Sync() override {
      if (env_->hold) {
        std::unique_lock<std::mutex> l(env_->mu);
        env_->entered = true;
        env_->cv.notify_all();
        env_->cv.wait(l, [&] { return env_->open; });
      }
      env_->syncs++;
      return inner()->Sync();
    }

   private:
    SyncGateEnv* env_;
  };
  std::unique_ptr<WritableFile> Wrap(std::unique_ptr<WritableFile> f) override {
    return std::make_unique<File>(this, std::move(f));
  }
};

// Group commit under `always`: while an fdatasync is in progress, records from
// several threads complete their writes, but neither the ack callback nor
// WaitDurable covers any of them; once it returns, one further fdatasync makes
// all of them durable and acknowledges them together.
TEST(GroupCommit, AcksOnlyAfterTheSyncThatCoversThem) {
  FaultEnv base;
  SyncGateEnv env(&base);
  ASSERT_TRUE(env.CreateDir("/g").ok());
  WalWriter w(&env, "/g", SyncPolicy::kAlways);
  ASSERT_TRUE(w.Create("g.wal", 1, 1).ok());
  std::atomic<uint64_t> max_ack{0};
  w.SetAckCallback([&](uint64_t lsn) {
    uint64_t cur = max_ack.load();
    while (cur < lsn && !max_ack.compare_exchange_weak(cur, lsn)) {
    }
  });
  // The sync thread calls the ack callback right after waking WaitDurable's
  // waiters: poll for it (bounded).
  auto await_ack = [&](uint64_t lsn) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (max_ack.load() < lsn && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return max_ack.load();
  };
  w.Start();
  std::vector<uint8_t> rows(4096, 0x5A);
  auto first = w.OnStore("g", 1, Side::kKeys, 0, 0, 2, rows);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(w.WaitDurable(*first).ok());
  EXPECT_EQ(await_ack(*first), *first);

  env.hold = true;
  auto second = w.OnStore("g", 1, Side::kKeys, 0, 2, 2, rows);  // wakes the sync thread
  ASSERT_TRUE(second.ok());
  env.AwaitEntered();  // its fdatasync is now blocked
  const int syncs_before = env.syncs.load();
  std::vector<std::thread> th;
  std::atomic<uint64_t> last{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto r = w.OnStore("g", 1, Side::kValues, static_cast<uint32_t>(t), i * 2, 2, rows);
        ASSERT_TRUE(r.ok());
        uint64_t cur = last.load();
        while (cur < *r && !last.compare_exchange_weak(cur, *r)) {
        }
      }
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(w.last_lsn(), last.load());  // all written...
  EXPECT_EQ(w.durable_lsn(), *first);    // ...none durable...
  EXPECT_EQ(max_ack.load(), *first);     // ...and none acknowledged
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    EXPECT_TRUE(w.WaitDurable(last.load()).ok());
    waited = true;
  });
  EXPECT_FALSE(waited.load());
  env.hold = false;
  env.Open();
  waiter.join();
  EXPECT_TRUE(waited.load());
  EXPECT_EQ(await_ack(last.load()), last.load());
  EXPECT_GE(w.durable_lsn(), last.load());
  // The blocked sync plus one more covered all 21 records.
  EXPECT_LE(env.syncs.load() - syncs_before, 2);
}

}  // namespace
}  // namespace pion::persist
