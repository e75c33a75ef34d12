// A restart that adopts the disk tier (docs/tier_format.md §3,
// docs/snapshot_format.md §6): a default-path snapshot references the values in
// the tier instead of copying them, a restart adopts the referenced extents
// (no value byte read into RAM), the WAL replays on top, a damaged or missing
// extent drops only its key, and a crash at any sync of a save leaves a
// snapshot whose references are valid. The snapshot and WAL live in a FaultEnv;
// the tier's file is a real file in a temporary directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "persist/persistence.h"
#include "persist/snapshot.h"
#include "persist/testing/fault_env.h"
#include "persist/wal_format.h"
#include "store/persist_adapter.h"
#include "store/store.h"

namespace pion::persist {
namespace {

using store::StrRef;
using store::StrValue;

constexpr uint64_t kBudget = 2 * 1024 * 1024;
constexpr size_t kValue = 256 * 1024;
const std::string kDir = "/db";
const std::string kSnap = "/db/pion.vstore";

std::string Value(int i, int gen = 0) {
  std::string v(kValue, '\0');
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = static_cast<char>((i * 131 + gen * 17 + static_cast<int>(j) * 7) & 0xff);
  return v;
}

// A store with a disk tier in `tier_dir` and its Persistence on `env`,
// recovered (adopting what the snapshot references) as pion-server starts.
struct TierNode {
  TierNode(Env* env, const std::string& tier_dir, uint64_t tier_bytes = 64 << 20)
      : store(store::StoreConfig{256, kBudget}) {
    Status st = store.AttachTier(tier_dir, tier_bytes, 64 * 1024, 1 << 20, 1, /*adopt=*/true);
    PION_CHECK(st.ok());
    PersistOptions o;
    o.dir = kDir;
    o.env = env;
    o.policy = SyncPolicy::kAlways;
    o.background = false;
    persist = std::make_unique<Persistence>(&store, o);
  }
  Status Recover() {
    Status s = persist->Recover();
    store.FinishTierAdoption();
    (void)store.MoveOverBudgetToTier();
    return s;
  }
  Status Set(const std::string& k, const std::string& v) {
    uint64_t lsn = 0;
    return store.StrSet(k, StrValue::Copy(v), store::SetOptions{}, &lsn).status();
  }
  void Del(const std::string& k) {
    uint64_t lsn = 0;
    ASSERT_TRUE(store.StrGetDel(k, &lsn).ok());
  }
  std::string Get(const std::string& k) {
    auto r = store.StrGet(k);
    return r.ok() && *r ? std::string((*r)->view()) : "<none>";
  }
  // The value as the keyspace holds it (a value on disk not read).
  StrRef Raw(const std::string& k) {
    StrRef out;
    (void)store.StrGetWith(
        k, [&out](const StrRef& v) { out = v; }, /*tiered_as_is=*/true);
    return out;
  }
  // Every queued tier write applied (bounded wait).
  void Settle() {
    const uint64_t deadline = MonotonicUs() + 30'000'000;
    while (store.tier_stats().backlog_bytes > 0 && MonotonicUs() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(store.tier_stats().backlog_bytes, 0u);
    uint64_t lsn = 0;
    (void)store.SetMaxBytes(store.max_bytes(), &lsn);  // applies finished moves under mu_
  }
  store::Store store;
  std::unique_ptr<Persistence> persist;
};

class TierRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pion-tier-restart-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string TierFile() const { return dir_ + "/pion-tier.dat"; }

  // Writes 32 values (most go to the tier under the 2 MiB budget), saves, and
  // returns what the store holds.
  std::map<std::string, std::string> WriteAndSave(TierNode& n) {
    std::map<std::string, std::string> want;
    for (int i = 0; i < 32; ++i) {
      const std::string k = "k" + std::to_string(i);
      EXPECT_TRUE(n.Set(k, Value(i)).ok());
      want[k] = Value(i);
    }
    n.Settle();
    EXPECT_GE(n.store.tier_stats().entries, 24u);
    EXPECT_TRUE(n.persist->Save("").ok());
    return want;
  }
  void ExpectAll(TierNode& n, const std::map<std::string, std::string>& want) {
    for (const auto& [k, v] : want) EXPECT_TRUE(n.Get(k) == v) << k << " differs";
  }

  std::string dir_;
};

TEST_F(TierRestartTest, SnapshotReferencesTheTierAndARestartAdoptsIt) {
  FaultEnv env;
  std::map<std::string, std::string> want;
  uint64_t tiered = 0;
  {
    TierNode n(&env, dir_);
    ASSERT_TRUE(n.Recover().ok());
    want = WriteAndSave(n);
    tiered = n.store.tier_stats().entries;
    // Referenced, not copied: the snapshot is far smaller than the values.
    EXPECT_LT(env.GetFile(kSnap).size(), (32 - tiered + 2) * kValue);
    // Written after the snapshot: replayed from the WAL on top of the adopted extents.
    ASSERT_TRUE(n.Raw("k0") != nullptr && n.Raw("k0")->on_disk());
    ASSERT_TRUE(n.Set("k0", Value(0, 1)).ok());  // overwrites an adopted value
    want["k0"] = Value(0, 1);
    n.Del("k1");
    want.erase("k1");
    ASSERT_TRUE(n.Set("k40", Value(40)).ok());
    want["k40"] = Value(40);
    n.Settle();
  }
  {
    TierNode m(&env, dir_);
    ASSERT_TRUE(m.Recover().ok());
    // Every tiered value of the snapshot adopted, none dropped, none in RAM.
    EXPECT_EQ(m.store.tier_adopted(), tiered);
    EXPECT_EQ(m.store.tier_adopt_drops(), 0u);
    m.Settle();
    EXPECT_LE(m.store.used_bytes(), kBudget);
    EXPECT_GE(m.store.tier_stats().entries, tiered - 2);
    EXPECT_EQ(m.Get("k1"), "<none>");
    ExpectAll(m, want);
    // A second generation: the adopted extents' pins are replaced by this save's.
    ASSERT_TRUE(m.persist->Save("").ok());
    ASSERT_TRUE(m.Set("k41", Value(41)).ok());
    want["k41"] = Value(41);
    m.Settle();
  }
  TierNode r(&env, dir_);
  ASSERT_TRUE(r.Recover().ok());
  EXPECT_EQ(r.store.tier_adopt_drops(), 0u);
  EXPECT_GT(r.store.tier_adopted(), 0u);
  ExpectAll(r, want);
}

TEST_F(TierRestartTest, ASnapshotToAnotherPathCopiesTheValues) {
  FaultEnv env;
  TierNode n(&env, dir_);
  ASSERT_TRUE(n.Recover().ok());
  auto want = WriteAndSave(n);
  ASSERT_TRUE(n.persist->Save("copy.vstore").ok());
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env, "/db/copy.vstore", static_cast<RecordSink*>(nullptr), &st).ok());
  EXPECT_EQ(st.tier_refs, 0u);
  EXPECT_EQ(st.strings, 32u);
  ASSERT_TRUE(LoadSnapshot(&env, kSnap, static_cast<RecordSink*>(nullptr), &st).ok());
  EXPECT_GE(st.tier_refs, 24u);
}

TEST_F(TierRestartTest, DamagedOrMissingExtentsDropOnlyTheirKeys) {
  FaultEnv env;
  std::map<std::string, std::string> want;
  uint64_t head_off = 0, value_off = 0, value_hb = 0;
  std::string head_key, value_key;
  {
    TierNode n(&env, dir_);
    ASSERT_TRUE(n.Recover().ok());
    want = WriteAndSave(n);
    for (const auto& [k, v] : want) {
      StrRef raw = n.Raw(k);
      if (raw == nullptr || !raw->on_disk()) continue;
      if (head_key.empty()) {
        head_key = k;
        head_off = raw->extent->offset;
      } else if (value_key.empty()) {
        value_key = k;
        value_off = raw->extent->offset;
        value_hb = raw->extent->header_bytes;
      }
    }
    ASSERT_FALSE(value_key.empty());
  }
  // One extent's header and another's value damaged on disk.
  {
    const int fd = ::open(TierFile().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const char junk[8] = {'d', 'a', 'm', 'a', 'g', 'e', 'd', '!'};
    ASSERT_EQ(::pwrite(fd, junk, 8, static_cast<off_t>(head_off + 16)), 8);
    ASSERT_EQ(::pwrite(fd, junk, 8, static_cast<off_t>(value_off + value_hb + 100)), 8);
    ::close(fd);
  }
  {
    TierNode m(&env, dir_);
    ASSERT_TRUE(m.Recover().ok());  // never a failed start
    EXPECT_EQ(m.store.tier_adopt_drops(), 1u);
    EXPECT_EQ(m.Get(head_key), "<none>");
    // Adopted (its header is intact), then dropped by its first, checked read.
    EXPECT_EQ(m.Get(value_key), "<none>");
    want.erase(head_key);
    want.erase(value_key);
    ExpectAll(m, want);
    EXPECT_GE(m.store.tier_stats().errors, 2u);
  }
  // The tier's file gone: every tiered key dropped, the rest served.
  std::filesystem::remove(TierFile());
  TierNode r(&env, dir_);
  ASSERT_TRUE(r.Recover().ok());
  EXPECT_GT(r.store.tier_adopt_drops(), 0u);
  EXPECT_EQ(r.store.tier_adopted(), 0u);
  for (const auto& [k, v] : want) {
    const std::string got = r.Get(k);
    EXPECT_TRUE(got == v || got == "<none>") << k << ": a wrong value";
  }
}

// A full tier whose extents the snapshot holds does not drop them to make
// room (that would free nothing): the new values are evicted instead, and
// every snapshotted value stays readable.
TEST_F(TierRestartTest, AFullTierKeepsTheValuesTheSnapshotHolds) {
  FaultEnv env;
  TierNode n(&env, dir_, 10 << 20);  // room for about 36 values
  ASSERT_TRUE(n.Recover().ok());
  std::map<std::string, std::string> held;  // in the tier at the snapshot
  for (const auto& [k, v] : WriteAndSave(n))
    if (StrRef raw = n.Raw(k); raw != nullptr && raw->on_disk()) held[k] = v;
  ASSERT_GE(held.size(), 24u);
  for (int i = 100; i < 140; ++i) ASSERT_TRUE(n.Set("k" + std::to_string(i), Value(i)).ok());
  n.Settle();
  uint64_t kept = 0;
  for (const auto& [k, v] : held) kept += n.Raw(k) != nullptr;
  EXPECT_EQ(kept, held.size());
  EXPECT_GE(n.store.tier_stats().entries, held.size());
  ExpectAll(n, held);
}

// A crash at each sync of a save (the WAL's, the snapshot file's, after the
// tier's fdatasync and before the rename, the directory's) recovers the state
// of before the save, with every reference valid (the previous snapshot's
// extents stay allocated until the new one is in place).
TEST_F(TierRestartTest, ACrashAtAnySyncOfASaveLeavesValidReferences) {
  bool completed = false;
  for (uint64_t nth = 1; nth <= 12 && !completed; ++nth) {
    std::filesystem::remove_all(dir_);
    FaultEnv env;
    std::map<std::string, std::string> want;
    DiskImage image;
    {
      TierNode n(&env, dir_);
      ASSERT_TRUE(n.Recover().ok());
      want = WriteAndSave(n);
      // Changes after the first snapshot: overwrites and deletes of tiered values.
      for (int i = 0; i < 32; i += 3) {
        const std::string k = "k" + std::to_string(i);
        ASSERT_TRUE(n.Set(k, Value(i, 2)).ok());
        want[k] = Value(i, 2);
      }
      for (int i = 1; i < 32; i += 5) {
        n.Del("k" + std::to_string(i));
        want.erase("k" + std::to_string(i));
      }
      n.Settle();
      ASSERT_TRUE(n.persist->Commit().ok());
      env.CrashAfterNthSync(nth, CrashMode::kDropUnsynced);
      (void)n.persist->Save("");
      if (!env.crashed()) {
        completed = true;
        image = env.Snapshot();
      } else {
        image = env.crash_image();
      }
    }
    FaultEnv rebooted(image, 1);
    TierNode m(&rebooted, dir_);
    ASSERT_TRUE(m.Recover().ok()) << "crash after sync " << nth;
    EXPECT_EQ(m.store.tier_adopt_drops(), 0u) << "crash after sync " << nth;
    ExpectAll(m, want);
  }
  EXPECT_TRUE(completed);
}

// Records what a loaded snapshot's STRING_TIER sections say.
struct TierRefSink final : RecordSink {
  std::vector<std::pair<std::string, StrTierRecord>> refs;
  std::vector<std::string> strings;
  Status Apply(const Record& r) override {
    std::visit(Overloaded{[&](const StrSetRec& x) { strings.emplace_back(x.key); },
                          [&](const StrTierRecord& x) { refs.emplace_back(std::string(x.key), x); },
                          [](const auto&) {}},
               r);
    return Status::OK();
  }
};

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

// The version 7 golden file: a STRING section and a STRING_TIER section, with
// a QUANT section for the referenced key; today's writer gives its bytes and
// the loader reads back every field.
TEST(Golden, Version7SnapshotWithATierReference) {
  std::vector<SnapshotString> strings(2);
  static const uint8_t kBytes[5] = {'h', 'e', 'l', 'l', 'o'};
  strings[0].key = "ram";
  strings[0].lru_stamp = 5;
  strings[0].data = kBytes;
  strings[0].size = 5;
  strings[1].key = "disk";
  strings[1].lru_stamp = 7;
  strings[1].expire_at_ms = 4102444800000;
  strings[1].size = 3 * 64;
  strings[1].data = nullptr;  // only referenced
  strings[1].in_tier = true;
  strings[1].tier = {8192, 8192, 4096, 0x1234abcd, 42};
  strings[1].quant.format = quant::Format::kFp16;
  strings[1].quant.dtype = 0;
  strings[1].quant.row = 32;
  SnapHeader h;
  h.generation = 1;
  h.next_lsn = 9;
  h.created_unix = 1767225600;
  h.lru_clock = 7;
  FaultEnv env;
  SnapshotWriteOptions wo;
  wo.tier_refs = true;
  int synced = 0;
  wo.before_rename = [&] {
    ++synced;
    return Status::OK();
  };
  ASSERT_TRUE(WriteSnapshot(&env, "/db/golden.vstore", h, {}, nullptr, &strings, &wo).ok());
  EXPECT_EQ(synced, 1);
  auto snap = env.GetFile("/db/golden.vstore");
  const std::string dir = PION_TESTDATA_DIR;
  if (std::getenv("PION_WRITE_GOLDEN"))
    std::ofstream(dir + "/golden_v7.vstore", std::ios::binary)
        .write(reinterpret_cast<const char*>(snap.data()), static_cast<long>(snap.size()));
  auto gsnap = ReadAll(dir + "/golden_v7.vstore");
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v7.vstore";
  ASSERT_EQ(GetU32(gsnap.data() + 8), 7u);
  EXPECT_EQ(gsnap, snap) << "snapshot bytes changed: a format change needs a new version";
  FaultEnv env2;
  env2.SetFile("/db/g.vstore", gsnap);
  TierRefSink sink;
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env2, "/db/g.vstore", &sink, &st).ok());
  EXPECT_EQ(st.strings, 2u);
  EXPECT_EQ(st.tier_refs, 1u);
  ASSERT_EQ(sink.strings.size(), 1u);
  EXPECT_EQ(sink.strings[0], "ram");
  ASSERT_EQ(sink.refs.size(), 1u);
  const StrTierRecord& r = sink.refs[0].second;
  EXPECT_EQ(sink.refs[0].first, "disk");
  EXPECT_EQ(r.expire_at_ms, 4102444800000);
  EXPECT_EQ(r.lru_stamp, 7u);
  EXPECT_EQ(r.value_len, 3u * 64);
  EXPECT_EQ(r.extent.offset, 8192u);
  EXPECT_EQ(r.extent.length, 8192u);
  EXPECT_EQ(r.extent.header_bytes, 4096u);
  EXPECT_EQ(r.extent.value_crc, 0x1234abcdu);
  EXPECT_EQ(r.extent.seq, 42u);

  // Without tier_refs (another path) the same strings are copies; a reference
  // that describes no extent is corruption of the snapshot.
  strings[1].data = nullptr;
  strings[1].size = 0;
  strings[1].quant = {};
  ASSERT_TRUE(WriteSnapshot(&env, "/db/copy.vstore", h, {}, nullptr, &strings).ok());
  ASSERT_TRUE(LoadSnapshot(&env, "/db/copy.vstore", static_cast<RecordSink*>(nullptr), &st).ok());
  EXPECT_EQ(st.tier_refs, 0u);
  strings[1].size = 3 * 64;
  strings[1].tier.header_bytes = 100;  // not a multiple of 4,096
  ASSERT_TRUE(WriteSnapshot(&env, "/db/bad.vstore", h, {}, nullptr, &strings, &wo).ok());
  Status bad = LoadSnapshot(&env, "/db/bad.vstore", static_cast<RecordSink*>(nullptr), &st);
  EXPECT_EQ(bad.code(), Code::kCorruption);
}

}  // namespace
}  // namespace pion::persist
