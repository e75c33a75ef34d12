// The crash loop (SQLite crash9.test, LevelDB fault_injection_test): run a
// scripted workload on the fault-injecting Env under appendfsync always, crash
// right after the Nth sync (file or directory) for every N until the workload
// completes, with unsynced bytes dropped, garbled or partly kept; reboot from
// the disk image, recover, and check that the state is exactly the state after
// some operation k with k >= the last acknowledged operation (every
// acknowledged write present and bit-identical, nothing torn or reordered
// visible). The workload includes compactions (SAVE), drops, evictions,
// re-registration with another format, FLUSHALL and overwrites.
#include <gtest/gtest.h>

#include <functional>

#include "base/log.h"
#include "persist/persistence.h"
#include "persist/testing/fault_env.h"
#include "persist/testing/test_util.h"
#include "store/prefix_ops.h"

namespace pion::persist {
namespace {

using testing::Dump;
using testing::Fill;
using testing::StoreDump;

const std::string kDir = "/db";

struct Op {
  std::string what;
  std::function<Status(store::Store&, Persistence&, uint64_t*)> run;
};

std::vector<Op> Workload() {
  std::vector<Op> ops;
  // One op per mutation, so that a crash can land between any two of them.
  auto fill = [&](std::string ns, quant::Format f, uint32_t dim, uint64_t start, uint64_t rows,
                  uint64_t seed, bool blocks = false) {
    ops.push_back({"register " + ns, [=](store::Store& s, Persistence&, uint64_t* lsn) {
                     // rows = 0: registers only.
                     return Fill(s, ns, f, dim, 0, start, 0, seed, lsn, blocks);
                   }});
    for (int side = 0; side < 2; ++side)
      for (uint32_t layer = 0; layer < 2; ++layer)
        ops.push_back({"store " + ns, [=](store::Store& s, Persistence&, uint64_t* lsn) {
                         std::vector<float> v(rows * dim);
                         for (size_t i = 0; i < v.size(); ++i)
                           v[i] = static_cast<float>((i * 2654435761u + seed * 97 + layer * 13 +
                                                      static_cast<uint64_t>(side)) %
                                                     1000) /
                                      250.f -
                                  2.f;
                         store::RowInput in;
                         in.data = v.data();
                         in.bytes = v.size() * sizeof(float);
                         return store::OpStoreRows({s, lsn}, ns + (side == 0 ? "_pk" : "_pv"),
                                                   layer, start, rows, in);
                       }});
  };
  auto save = [&] {
    ops.push_back({"save", [](store::Store&, Persistence& p, uint64_t*) { return p.Save(""); }});
  };
  auto drop = [&](std::string ns) {
    ops.push_back({"drop " + ns, [=](store::Store& s, Persistence&, uint64_t* lsn) {
                     std::string_view n[] = {ns};
                     auto r = store::OpDrop({s, lsn}, n);
                     return r.ok() ? Status::OK() : r.status();
                   }});
  };
  fill("a", quant::Format::kFp16, 64, 0, 20, 1, true);
  fill("b", quant::Format::kInt8, 64, 0, 20, 2);
  fill("a", quant::Format::kFp16, 64, 10, 20, 3);  // overwrite + extend
  save();
  fill("c", quant::Format::kTurbo4, 64, 0, 9, 4);
  drop("b");
  fill("d", quant::Format::kFp8, 32, 0, 7, 5);  // evicts the LRU namespace (max 3)
  fill("e", quant::Format::kMlx4g32, 64, 0, 5, 6, true);
  save();
  fill("c", quant::Format::kTurbo4, 64, 100, 3, 7);
  ops.push_back(
      {"flushall", [](store::Store& s, Persistence&, uint64_t* lsn) { return s.FlushAll(lsn); }});
  fill("a", quant::Format::kTurbo2, 64, 0, 6, 8);  // same name, another format
  fill("f", quant::Format::kTurbo3, 32, 0, 4, 9);
  save();
  fill("f", quant::Format::kTurbo3, 32, 4, 4, 10);
  return ops;
}

struct Outcome {
  bool completed = false;
  size_t last_acked = 0;          // ops[0..last_acked) acknowledged
  std::vector<StoreDump> states;  // states[k]: after k ops (by the live store)
};

std::unique_ptr<Persistence> MakePersist(store::Store* s, Env* env) {
  PersistOptions o;
  o.dir = kDir;
  o.env = env;
  o.policy = SyncPolicy::kAlways;
  o.background = false;
  return std::make_unique<Persistence>(s, o);
}

Outcome RunUntilCrash(FaultEnv& env, const std::vector<Op>& ops) {
  Outcome out;
  store::Store s(store::StoreConfig{6, 0});
  auto p = MakePersist(&s, &env);
  out.states.push_back(Dump(s));
  if (!p->Recover().ok()) return out;
  for (size_t i = 0; i < ops.size(); ++i) {
    uint64_t lsn = 0;
    Status st = ops[i].run(s, *p, &lsn);
    if (st.ok() && lsn != 0) st = p->WaitDurable(lsn);
    out.states.push_back(Dump(s));
    if (!st.ok()) break;
    out.last_acked = i + 1;
  }
  out.completed = !env.crashed();
  return out;
}

void CrashLoop(CrashMode mode, uint64_t seed) {
  SetLogLevel(LogLevel::kWarning);
  auto ops = Workload();
  int crashes = 0;
  for (uint64_t n = 1;; ++n) {
    FaultEnv env(seed + n);
    env.CrashAfterNthSync(n, mode);
    Outcome o = RunUntilCrash(env, ops);
    if (o.completed) break;
    ++crashes;
    // Reboot from the image and recover.
    FaultEnv disk(env.crash_image(), seed * 31 + n);
    store::Store s(store::StoreConfig{6, 0});
    auto p = MakePersist(&s, &disk);
    Status st = p->Recover();
    ASSERT_TRUE(st.ok()) << "crash after sync " << n << ": " << st.ToString();
    StoreDump got = Dump(s);
    bool match = false;
    for (size_t k = o.last_acked; k < o.states.size() && !match; ++k) match = got == o.states[k];
    ASSERT_TRUE(match) << "crash after sync " << n << " (mode " << static_cast<int>(mode)
                       << "): recovered state is not the state after any op >= " << o.last_acked
                       << " of " << o.states.size() - 1;
    // The recovered server keeps working: one more write, recover again.
    uint64_t lsn = 0;
    ASSERT_TRUE(Fill(s, "after", quant::Format::kFp16, 16, 1, 0, 2, 99, &lsn).ok());
    ASSERT_TRUE(p->WaitDurable(lsn).ok());
    StoreDump again = Dump(s);
    p.reset();
    store::Store s2(store::StoreConfig{6, 0});
    auto p2 = MakePersist(&s2, &disk);
    ASSERT_TRUE(p2->Recover().ok());
    ASSERT_EQ(Dump(s2), again) << "second recovery after crash " << n;
  }
  EXPECT_GT(crashes, 20);
  std::printf("mode %d: %d crash points checked\n", static_cast<int>(mode), crashes);
}

TEST(CrashLoop, DropUnsynced) { CrashLoop(CrashMode::kDropUnsynced, 1); }
TEST(CrashLoop, GarbleUnsynced) { CrashLoop(CrashMode::kGarbleUnsynced, 2); }
TEST(CrashLoop, PartialUnsynced) { CrashLoop(CrashMode::kPartialUnsynced, 3); }

}  // namespace
}  // namespace pion::persist
