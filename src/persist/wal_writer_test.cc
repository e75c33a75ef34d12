// Unit tests of the WAL writer (docs/wal_format.md): every record type round
// trips through a close and a recovery, appends from many threads written out
// of order are acknowledged only as a contiguous prefix, group commit, space
// preallocated ahead of the log's end, and writers racing with saves.
#include "persist/wal_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "persist/persistence.h"
#include "persist/testing/fault_env.h"
#include "persist/testing/persist_fixture.h"
#include "persist/testing/test_util.h"
#include "persist/testing/wrapping_env.h"
#include "persist/wal_reader.h"
#include "store/prefix_ops.h"

namespace pion::persist {
namespace {

using store::Store;
using store::StoreConfig;
using testing::Dump;
using testing::Fill;
using testing::HeaderLsn;
using testing::HookEnv;
using testing::kAllFormats;
using testing::kDir;
using testing::kWal;
using testing::Node;
using testing::RecoveredNode;
using testing::Rows;
using testing::StoreDump;
using testing::WriteAndReopen;

TEST(Wal, RoundTripEveryRecordType) {
  FaultEnv env;
  auto m = WriteAndReopen(env, [&](Node& n) {
    uint64_t lsn = 0;
    for (size_t i = 0; i < std::size(kAllFormats); ++i)
      ASSERT_TRUE(
          Fill(n.store, "ns" + std::to_string(i), kAllFormats[i], 64, 2, 0, 5, i, &lsn, i % 2 == 0)
              .ok());
    std::string_view names[] = {"ns1"};
    ASSERT_TRUE(store::OpDrop({n.store, &lsn}, names).ok());
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
            auto r = store::OpDrop({n.store, &lsn}, names);
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
              store::OpStoreRows({n.store, &l}, i % 2 ? "s_pk" : "s_pv", rng() % 2, start, count,
                                 {store::RowInput::Type::kF32, rows.data(), rows.size() * 4});
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

// Many threads append records of mixed sizes (64 B .. 256 KiB) whose writes
// finish out of order; every ack (appended LSN under `no`, durable LSN under
// `always`) only covers LSNs whose records, and all before them, were fully
// written; LSNs are dense, per-thread increasing, and the file reads back clean.
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
              const std::string ns = "ns" + std::to_string(t);
              r = w.Log(DropRec{ns, 1, store::DropReason::kDrop});
            } else {
              size_t rows = size_t{1} << ((i * 7 + t) % 13);  // 1 .. 4096 rows of 64 B
              std::vector<uint8_t> v(rows * 64, 0xAB);
              const std::string ns = "ns" + std::to_string(t);
              r = w.Log(Rows(ns, 1, store::Side::kKeys, 0, static_cast<uint64_t>(i), rows, v));
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
  auto first = w.Log(Rows("g", 1, Side::kKeys, 0, 0, 2, rows));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(w.WaitDurable(*first).ok());
  EXPECT_EQ(await_ack(*first), *first);

  env.hold = true;
  auto second = w.Log(Rows("g", 1, Side::kKeys, 0, 2, 2, rows));  // wakes the sync thread
  ASSERT_TRUE(second.ok());
  env.AwaitEntered();  // its fdatasync is now blocked
  const int syncs_before = env.syncs.load();
  std::vector<std::thread> th;
  std::atomic<uint64_t> last{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto r = w.Log(Rows("g", 1, Side::kValues, static_cast<uint32_t>(t), i * 2, 2, rows));
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
