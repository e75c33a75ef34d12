// Unit tests of I/O failures injected by FaultEnv: a full disk during an
// append or a save, a failed fdatasync (writes refused until a snapshot), the
// automatic snapshot's back-off, and a failed record between two written ones.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "persist/testing/persist_fixture.h"
#include "persist/wal_reader.h"
#include "persist/wal_writer.h"
#include "store/prefix_ops.h"

namespace pion::persist {
namespace {

using testing::Dump;
using testing::Fill;
using testing::HookEnv;
using testing::kDir;
using testing::kSnap;
using testing::kWal;
using testing::Latch;
using testing::Node;
using testing::RecoveredNode;
using testing::Rows;
using testing::StoreDump;
using testing::WriteAndReopen;

// A failed append is cut off the file and, once space is
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
    Status s = store::OpRegister({n.store, &lsn}, ra);
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_NE(s.message().find("No space left on device"), std::string::npos);
    EXPECT_EQ(Dump(n.store), before);                      // nothing applied
    EXPECT_EQ(store::OpLookup({n.store}, "a").hit, true);  // reads still served
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
    ASSERT_TRUE(store::OpRegister({n.store, &lsn}, ra).ok());
    const uint64_t held = lsn;
    EXPECT_EQ(n.persist->WaitDurable(held).code(), Code::kIOError);
    Status s = store::OpRegister({n.store, &lsn}, ra);
    EXPECT_EQ(s.code(), Code::kIOError);
    EXPECT_NE(s.message().find("until a snapshot"), std::string::npos) << s.message();
    EXPECT_TRUE(store::OpLookup({n.store}, "a").hit);
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
  ASSERT_TRUE(store::OpRegister({n.store, &lsn}, ra).ok());
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
    ASSERT_EQ(*w.Log(RegisterRec{.ns = "ns", .incarnation = 1, .kv_dim = 16}), 1u);
    off_a = w.Stats().bytes;
    std::vector<uint8_t> a(kBigA, 0xAB), c(kBigC, 0xAB);
    Result<uint64_t> ra = uint64_t{0}, rc = uint64_t{0};
    std::thread ta(
        [&] { ra = w.Log(Rows("ns", 1, store::Side::kKeys, 0, 0, kBigA / 32, a)); });  // lsn 2
    la.AwaitEntered();
    // lsn 3: written completely while lsn 2 is still being written.
    auto rb = w.Log(DropRec{"other", 7, store::DropReason::kDrop});
    ASSERT_TRUE(rb.ok());
    EXPECT_EQ(*rb, 3u);
    std::thread tc(
        [&] { rc = w.Log(Rows("ns", 1, store::Side::kValues, 0, 0, kBigC / 32, c)); });  // lsn 4
    lc.AwaitEntered();
    EXPECT_EQ(w.last_lsn(), 1u);  // 3 is written but 2 is not
    la.Open();
    ta.join();
    EXPECT_EQ(ra.status().code(), Code::kIOError);
    EXPECT_NE(ra.status().message().find("No space left on device"), std::string::npos);
    EXPECT_EQ(w.Log(FlushAllRec{}).status().code(), Code::kIOError);  // refused: broken
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

}  // namespace
}  // namespace pion::persist
