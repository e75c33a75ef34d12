// Fixtures shared by the persistence unit tests (wal_writer_test, wal_reader_test,
// snapshot_test, recovery_test, fault_injection_test): the file names of a
// node's data directory, a store with its Persistence on a test Env (Node,
// RecoveredNode), a write-close-recover round trip, and the hooks that let a
// test hold or fail one write (HookEnv, Latch, HeaderLsn).
//
// Test-only and header-only (GoogleTest assertions inside); the fuzz targets
// that link pion_persist_testing do not include it.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/status.h"
#include "persist/persistence.h"
#include "persist/testing/fault_env.h"
#include "persist/testing/test_util.h"
#include "persist/testing/wrapping_env.h"
#include "persist/wal_format.h"
#include "store/store.h"

namespace pion::persist::testing {

inline const std::string kDir = "/db";

// A STORE record of `rows` (whole rows of rows.size() / count bytes), for
// MutationSink::Log.
inline StoreRec Rows(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                     uint64_t start, uint64_t count, std::span<const uint8_t> rows) {
  PION_CHECK(count > 0 && rows.size() % count == 0);
  StoreRec r;
  r.ns = ns;
  r.incarnation = incarnation;
  r.side = side;
  r.layer = layer;
  r.start = start;
  r.count = count;
  r.row_bytes = static_cast<uint32_t>(rows.size() / count);
  r.rows = rows;
  return r;
}
inline const std::string kWal = "/db/pion.vstore.wal";
inline const std::string kSnap = "/db/pion.vstore";

inline constexpr quant::Format kAllFormats[] = {
    quant::Format::kInt8, quant::Format::kTurbo4, quant::Format::kTurbo3, quant::Format::kTurbo2,
    quant::Format::kFp16, quant::Format::kFp8,    quant::Format::kMlx4g32};

// A store and its Persistence on `env` (data directory kDir, no background thread).
struct Node {
  explicit Node(Env* env, SyncPolicy p = SyncPolicy::kAlways, bool repair = false,
                bool recycle = true)
      : store(store::StoreConfig{}) {
    PersistOptions o;
    o.dir = kDir;
    o.env = env;
    o.policy = p;
    o.wal_repair = repair;
    o.wal_recycle = recycle;
    o.background = false;
    persist = std::make_unique<Persistence>(&store, o);
  }
  store::Store store;
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
inline std::unique_ptr<RecoveredNode> WriteAndReopen(FaultEnv& env,
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

// A committed WAL of two namespaces (2 x (register + 2 stores)); `wal_size` gets
// its size. Returns the state it holds.
inline StoreDump WriteThree(FaultEnv& env, uint64_t* wal_size) {
  Node n(&env);
  PION_CHECK(n.persist->Recover().ok());
  uint64_t lsn = 0;
  PION_CHECK(Fill(n.store, "x", quant::Format::kFp16, 16, 1, 0, 4, 1, &lsn).ok());
  PION_CHECK(Fill(n.store, "y", quant::Format::kInt8, 16, 1, 0, 4, 2, &lsn).ok());
  PION_CHECK(n.persist->Commit().ok());
  *wal_size = env.GetFile(kWal).size();
  return Dump(n.store);
}

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
inline uint64_t HeaderLsn(std::span<const uint8_t> data) {
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

}  // namespace pion::persist::testing
