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

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "base/fp16.h"
#include "persist/persistence.h"
#include "persist/snapshot.h"
#include "persist/testing/fault_env.h"
#include "persist/wal_format.h"
#include "store/persist_adapter.h"
#include "store/prefix_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

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

// Namespaces: fp16 rows of kNsDim, kNsRows per layer (two chunks: 512 + 128 rows).
constexpr uint32_t kNsDim = 256;
constexpr uint64_t kNsRows = 640;
constexpr size_t kNsRowBytes = kNsDim * 2;
// The layers each namespace stores: K layers 0 and 2, V layer 1 (~960 KiB).
constexpr std::pair<int, uint32_t> kNsLayers[] = {{0, 0}, {0, 2}, {1, 1}};

std::vector<uint16_t> NsRows(int i, int side, uint32_t layer, int gen, uint64_t count = kNsRows) {
  std::vector<uint16_t> v(count * kNsDim);
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = F32ToF16(static_cast<float>((j * 7 + static_cast<size_t>(i) * 13 + side * 5 + layer * 3 +
                                        static_cast<size_t>(gen) * 11) %
                                       251) /
                    251.0f);
  return v;
}
std::string NsName(int i) { return "ns" + std::to_string(i); }
std::string NsSid(const std::string& ns, int side) { return ns + (side == 0 ? "_pk" : "_pv"); }

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
    return store::OpSet({store, &lsn}, k, StrValue::Copy(v), store::SetOptions{}).status();
  }
  void Del(const std::string& k) {
    uint64_t lsn = 0;
    ASSERT_TRUE(store::OpGetDel({store, &lsn}, k).ok());
  }
  std::string Get(const std::string& k) {
    auto r = store::OpGet({store}, k);
    return r.ok() && *r ? std::string((*r)->view()) : "<none>";
  }
  // The value as the keyspace holds it (a value on disk not read).
  StrRef Raw(const std::string& k) {
    StrRef out;
    (void)store::OpGetWith(
        {store}, k, [&out](const StrRef& v) { out = v; }, /*tiered_as_is=*/true);
    return out;
  }
  void RegisterNs(const std::string& name) {
    store::RegisterArgs a;
    a.ns = name;
    a.kv_dim = kNsDim;
    a.fmt = quant::Format::kFp16;
    uint64_t lsn = 0;
    ASSERT_TRUE(store::OpRegister({store, &lsn}, a).ok());
  }
  // Rows [start, start + rows.size() / kNsDim) of a layer; returns the bytes stored.
  std::string StoreNs(const std::string& ns, int side, uint32_t layer, uint64_t start,
                      const std::vector<uint16_t>& rows) {
    uint64_t lsn = 0;
    Status s = store::OpStoreRows(
        {store, &lsn}, NsSid(ns, side), layer, start, rows.size() / kNsDim,
        store::RowInput{store::RowInput::Type::kF16, rows.data(), rows.size() * 2});
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * 2);
  }
  // A layer's rows [0, kNsRows) as stored, or "<none>".
  std::string FetchNs(const std::string& ns, int side, uint32_t layer) {
    auto p = store::OpFetchRange({store}, NsSid(ns, side), layer, 0, kNsRows);
    if (!p.ok()) return "<none>";
    std::string out;
    for (const store::FetchSegment& sg : p->segments) {
      const size_t n = sg.rows * p->row_bytes;
      if (sg.data != nullptr)
        out.append(reinterpret_cast<const char*>(sg.data), n);
      else
        out.append(n, '\0');
    }
    return out;
  }
  void DropNs(const std::string& ns) {
    uint64_t lsn = 0;
    const std::string_view names[1] = {ns};
    auto r = store::OpDrop({store, &lsn}, names);
    ASSERT_TRUE(r.ok() && *r == 1);
  }
  bool NsOnDisk(const std::string& ns) {
    store::NamespaceInfo info;
    return store::OpDescribe({store}, ns, &info) && info.on_disk;
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
    // What the snapshot references (a move still in flight when it was taken is
    // copied, so the tier's entry count may be one more).
    SnapshotStats st;
    ASSERT_TRUE(LoadSnapshot(&env, kSnap, static_cast<RecordSink*>(nullptr), &st).ok());
    tiered = st.tier_refs;
    EXPECT_GE(tiered, 16u);
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

// ---- Namespaces in the tier (NAMESPACE_TIER, snapshot version 8) ----

using NsWant = std::map<std::string, std::string>;  // "ns/side/layer" -> the layer's bytes
std::string NsKey(const std::string& ns, int side, uint32_t layer) {
  return ns + "/" + std::to_string(side) + "/" + std::to_string(layer);
}

class NsTierRestartTest : public TierRestartTest {
 protected:
  // Eight namespaces of ~960 KiB under the 2 MiB budget (most move to the
  // tier), one of them then partly rewritten (a chunk in RAM, the rest still
  // in its extent); saves; returns what each layer holds.
  NsWant WriteNsAndSave(TierNode& n) {
    NsWant want;
    for (int i = 0; i < 8; ++i) {
      n.RegisterNs(NsName(i));
      for (auto [side, layer] : kNsLayers)
        want[NsKey(NsName(i), side, layer)] =
            n.StoreNs(NsName(i), side, layer, 0, NsRows(i, side, layer, 0));
    }
    n.Settle();
    int tiered = 0;
    for (int i = 0; i < 8; ++i) tiered += n.NsOnDisk(NsName(i)) ? 1 : 0;
    EXPECT_GE(tiered, 4);
    EXPECT_TRUE(n.persist->Save("").ok());
    return want;
  }
  // The rows of the layer an NsKey names, as `n` serves them.
  static std::string Fetch(TierNode& n, const std::string& k) {
    return n.FetchNs(k.substr(0, k.find('/')), k[k.find('/') + 1] - '0',
                     static_cast<uint32_t>(std::stoul(k.substr(k.rfind('/') + 1))));
  }
  void ExpectNs(TierNode& n, const NsWant& want) {
    for (const auto& [k, v] : want) EXPECT_TRUE(Fetch(n, k) == v) << k << " differs";
  }
  static void Forget(NsWant* want, const std::string& ns) {
    for (auto [side, layer] : kNsLayers) want->erase(NsKey(ns, side, layer));
  }
  SnapshotStats SnapStats(FaultEnv& env) {
    SnapshotStats st;
    EXPECT_TRUE(LoadSnapshot(&env, kSnap, static_cast<RecordSink*>(nullptr), &st).ok());
    return st;
  }
};

TEST_F(NsTierRestartTest, NamespacesInTheTierAreReferencedAndAdopted) {
  FaultEnv env;
  NsWant want;
  uint64_t refs = 0;
  {
    TierNode n(&env, dir_);
    ASSERT_TRUE(n.Recover().ok());
    want = WriteNsAndSave(n);
    const SnapshotStats st = SnapStats(env);
    refs = st.ns_tier_refs;
    ASSERT_GE(refs, 4u);
    EXPECT_GE(st.tier_rows, refs * kNsRows);
    // Referenced, not copied: the file holds at most the namespaces in RAM.
    EXPECT_LT(env.GetFile(kSnap).size(), (8 - refs + 1) * 3 * kNsRows * kNsRowBytes);
    // After the snapshot (replayed from the WAL on top): rows rewritten in an
    // adopted namespace, one dropped, one new.
    int on_disk = -1;
    for (int i = 0; i < 8 && on_disk < 0; ++i)
      if (n.NsOnDisk(NsName(i))) on_disk = i;
    ASSERT_GE(on_disk, 0);
    std::string& l0 = want[NsKey(NsName(on_disk), 0, 0)];
    l0.replace(0, 16 * kNsRowBytes,
               n.StoreNs(NsName(on_disk), 0, 0, 0, NsRows(on_disk, 0, 0, 1, 16)));
    n.DropNs(NsName(7));
    Forget(&want, NsName(7));
    n.RegisterNs("ns9");
    want[NsKey("ns9", 1, 1)] = n.StoreNs("ns9", 1, 1, 0, NsRows(9, 1, 1, 0));
    n.Settle();
  }
  {
    TierNode m(&env, dir_);
    ASSERT_TRUE(m.Recover().ok());
    // Every referenced namespace adopted, none dropped, its rows not in RAM.
    EXPECT_EQ(m.store.tier_ns_adopted(), refs);
    EXPECT_EQ(m.store.tier_adopt_drops(), 0u);
    m.Settle();
    EXPECT_LE(m.store.used_bytes(), kBudget);
    ExpectNs(m, want);
    // A second generation: this save's pins replace the adopted ones.
    ASSERT_TRUE(m.persist->Save("").ok());
    EXPECT_GT(SnapStats(env).ns_tier_refs, 0u);
  }
  TierNode r(&env, dir_);
  ASSERT_TRUE(r.Recover().ok());
  EXPECT_EQ(r.store.tier_adopt_drops(), 0u);
  EXPECT_GT(r.store.tier_ns_adopted(), 0u);
  ExpectNs(r, want);
}

TEST_F(NsTierRestartTest, APartlyRewrittenNamespaceKeepsItsChunksInTheTier) {
  FaultEnv env;
  NsWant want;
  std::string ns;
  {
    TierNode n(&env, dir_);
    ASSERT_TRUE(n.Recover().ok());
    want = WriteNsAndSave(n);
    for (int i = 0; i < 8 && ns.empty(); ++i)
      if (n.NsOnDisk(NsName(i))) ns = NsName(i);
    ASSERT_FALSE(ns.empty());
    // One row of the second chunk rewritten: that chunk is copied into RAM, the
    // others still borrow the extent (the namespace is charged to RAM again).
    const int i = ns[2] - '0';
    std::string& l0 = want[NsKey(ns, 0, 0)];
    l0.replace(600 * kNsRowBytes, kNsRowBytes, n.StoreNs(ns, 0, 0, 600, NsRows(i, 0, 0, 3, 1)));
    ASSERT_FALSE(n.NsOnDisk(ns));
    ASSERT_NE(n.store.namespace_extent_for_test(ns), nullptr);
    ASSERT_TRUE(n.persist->Save("").ok());
  }
  TierNode m(&env, dir_);
  ASSERT_TRUE(m.Recover().ok());
  EXPECT_EQ(m.store.tier_adopt_drops(), 0u);
  EXPECT_GT(m.store.tier_ns_adopted(), 0u);
  ExpectNs(m, want);
}

TEST_F(NsTierRestartTest, DamagedOrMissingExtentsDropOnlyTheirNamespaces) {
  FaultEnv env;
  NsWant want;
  std::vector<std::pair<std::string, uint64_t>> on_disk;  // name, extent offset
  uint64_t value_at = 0;                                  // the second one's value
  {
    TierNode n(&env, dir_);
    ASSERT_TRUE(n.Recover().ok());
    want = WriteNsAndSave(n);
    for (int i = 0; i < 8; ++i)
      if (n.NsOnDisk(NsName(i))) {
        tier::ExtentRef x = n.store.namespace_extent_for_test(NsName(i));
        ASSERT_NE(x, nullptr);
        on_disk.emplace_back(NsName(i), x->offset);
        if (on_disk.size() == 2) value_at = x->offset + x->header_bytes + 100;
      }
    ASSERT_GE(on_disk.size(), 2u);
  }
  // One extent's header and another's value damaged on disk.
  const std::string head_ns = on_disk[0].first;
  const std::string value_ns = on_disk[1].first;
  {
    const int fd = ::open(TierFile().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const char junk[8] = {'d', 'a', 'm', 'a', 'g', 'e', 'd', '!'};
    ASSERT_EQ(::pwrite(fd, junk, 8, static_cast<off_t>(on_disk[0].second + 16)), 8);
    ASSERT_EQ(::pwrite(fd, junk, 8, static_cast<off_t>(value_at)), 8);
    ::close(fd);
  }
  {
    TierNode m(&env, dir_);
    ASSERT_TRUE(m.Recover().ok());  // never a failed start
    EXPECT_EQ(m.store.tier_adopt_drops(), 1u);
    EXPECT_FALSE(m.NsOnDisk(head_ns));
    EXPECT_EQ(m.FetchNs(head_ns, 0, 0), "<none>");
    // Adopted (its header is intact), then dropped by its first, checked read.
    EXPECT_EQ(m.FetchNs(value_ns, 0, 0), "<none>");
    Forget(&want, head_ns);
    Forget(&want, value_ns);
    ExpectNs(m, want);
    EXPECT_GE(m.store.tier_stats().errors, 2u);
  }
  // The tier's file gone: every tiered namespace dropped, the rest served.
  std::filesystem::remove(TierFile());
  TierNode r(&env, dir_);
  ASSERT_TRUE(r.Recover().ok());
  EXPECT_GT(r.store.tier_adopt_drops(), 0u);
  EXPECT_EQ(r.store.tier_ns_adopted(), 0u);
  for (const auto& [k, v] : want) {
    const std::string got = Fetch(r, k);
    EXPECT_TRUE(got == v || got == "<none>") << k << ": wrong rows";
  }
}

// A crash at each sync of a save (as for strings above): the state of before
// the save, every namespace reference valid.
TEST_F(NsTierRestartTest, ACrashAtAnySyncOfASaveLeavesValidReferences) {
  bool completed = false;
  for (uint64_t nth = 1; nth <= 12 && !completed; ++nth) {
    std::filesystem::remove_all(dir_);
    FaultEnv env;
    NsWant want;
    DiskImage image;
    {
      TierNode n(&env, dir_);
      ASSERT_TRUE(n.Recover().ok());
      want = WriteNsAndSave(n);
      // Changes after the first snapshot: rewrites and drops of tiered namespaces.
      for (int i = 0; i < 8; i += 3) {
        std::string& l = want[NsKey(NsName(i), 1, 1)];
        l.replace(0, 32 * kNsRowBytes, n.StoreNs(NsName(i), 1, 1, 0, NsRows(i, 1, 1, 2, 32)));
      }
      n.DropNs(NsName(1));
      Forget(&want, NsName(1));
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
    ExpectNs(m, want);
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
                          [&](const StoreRec& x) {
                            stored.push_back({x.side, x.layer, x.start, x.count, 0});
                          },
                          [&](const NsTierRecord& x) {
                            ns_refs.push_back(x);
                            ns_names.emplace_back(x.ns);
                          },
                          [](const auto&) {}},
               r);
    return Status::OK();
  }
  std::vector<NsTierChunkRecord> stored;  // ROWS sections: side, layer, start, rows
  std::vector<NsTierRecord> ns_refs;      // (ns views into the file: see ns_names)
  std::vector<std::string> ns_names;
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
  // Version 8 (NAMESPACE_TIER, below) is today's: this workload has no
  // namespace, so today's bytes equal the golden file's after the file header
  // (whose version, and so CRC, differs). PION_WRITE_GOLDEN no longer rewrites it.
  auto gsnap = ReadAll(dir + "/golden_v7.vstore");
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v7.vstore";
  ASSERT_EQ(GetU32(gsnap.data() + 8), 7u);
  ASSERT_GE(snap.size(), kSnapHeaderSize);
  EXPECT_EQ(GetU32(snap.data() + 8), kSnapVersion);
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         snap.begin() + kSnapHeaderSize, snap.end()))
      << "snapshot bytes changed: a format change needs a new version";
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

// The version 8 golden file: a namespace with chunks in the disk tier (K
// layers 0 and 1, the second after a gap of one chunk) and a layer in RAM (V
// layer 1); today's writer gives its bytes and the loader reads every field.
TEST(Golden, Version8SnapshotWithANamespaceTierReference) {
  static const uint8_t kRows[5 * 128] = {};  // (only copied without tier_refs)
  static uint8_t ram[2 * 128];
  for (size_t i = 0; i < sizeof ram; ++i) ram[i] = static_cast<uint8_t>(i * 3 + 1);
  std::vector<SnapshotNamespace> views(1);
  SnapshotNamespace& v = views[0];
  v.ns = "gns";
  v.kv_dim = 64;  // fp16: 128-byte rows, 2,048 rows per chunk
  v.fmt = quant::Format::kFp16;
  v.incarnation = 3;
  v.lru_stamp = 4;
  v.in_tier = true;
  v.tier = {8192, 8192, 4096, 0xabcdef01, 43};
  v.tier_value_len = 384 + 5 * 128;
  v.layers[0].push_back({0, 3, {{nullptr, kRows, 3, true, 0}}});
  v.layers[0].push_back({1, 2053, {{nullptr, nullptr, 2048}, {nullptr, kRows, 5, true, 384}}});
  v.layers[1].push_back({1, 2, {{nullptr, ram, 2}}});
  SnapHeader h;
  h.generation = 1;
  h.next_lsn = 9;
  h.created_unix = 1767225600;
  h.lru_clock = 4;
  h.namespace_count = 1;
  FaultEnv env;
  SnapshotWriteOptions wo;
  wo.tier_refs = true;
  ASSERT_TRUE(WriteSnapshot(&env, "/db/golden.vstore", h, views, nullptr, nullptr, &wo).ok());
  auto snap = env.GetFile("/db/golden.vstore");
  const std::string dir = PION_TESTDATA_DIR;
  if (std::getenv("PION_WRITE_GOLDEN"))
    std::ofstream(dir + "/golden_v8.vstore", std::ios::binary)
        .write(reinterpret_cast<const char*>(snap.data()), static_cast<long>(snap.size()));
  auto gsnap = ReadAll(dir + "/golden_v8.vstore");
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v8.vstore";
  ASSERT_EQ(GetU32(gsnap.data() + 8), 8u);
  EXPECT_EQ(gsnap, snap) << "snapshot bytes changed: a format change needs a new version";
  FaultEnv env2;
  env2.SetFile("/db/g.vstore", gsnap);
  TierRefSink sink;
  SnapshotStats st;
  ASSERT_TRUE(LoadSnapshot(&env2, "/db/g.vstore", &sink, &st).ok());
  EXPECT_EQ(st.namespaces, 1u);
  EXPECT_EQ(st.ns_tier_refs, 1u);
  EXPECT_EQ(st.tier_rows, 8u);
  EXPECT_EQ(st.rows, 2u);  // only the RAM layer's rows are in the file
  ASSERT_EQ(sink.stored.size(), 1u);
  EXPECT_EQ(sink.stored[0].side, Side::kValues);
  EXPECT_EQ(sink.stored[0].layer, 1u);
  EXPECT_EQ(sink.stored[0].rows, 2u);
  ASSERT_EQ(sink.ns_refs.size(), 1u);
  const NsTierRecord& r = sink.ns_refs[0];
  EXPECT_EQ(sink.ns_names[0], "gns");
  EXPECT_EQ(r.incarnation, 3u);
  EXPECT_EQ(r.row_bytes, 128u);
  EXPECT_EQ(r.value_len, 1024u);
  EXPECT_EQ(r.extent.offset, 8192u);
  EXPECT_EQ(r.extent.length, 8192u);
  EXPECT_EQ(r.extent.header_bytes, 4096u);
  EXPECT_EQ(r.extent.value_crc, 0xabcdef01u);
  EXPECT_EQ(r.extent.seq, 43u);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0].side, Side::kKeys);
  EXPECT_EQ(r.chunks[0].layer, 0u);
  EXPECT_EQ(r.chunks[0].start, 0u);
  EXPECT_EQ(r.chunks[0].rows, 3u);
  EXPECT_EQ(r.chunks[0].value_offset, 0u);
  EXPECT_EQ(r.chunks[1].layer, 1u);
  EXPECT_EQ(r.chunks[1].start, 2048u);
  EXPECT_EQ(r.chunks[1].rows, 5u);
  EXPECT_EQ(r.chunks[1].value_offset, 384u);

  // Another path copies the rows; a chunk outside the extent's value, or a
  // NAMESPACE_TIER section in an older version, is corruption of the snapshot.
  ASSERT_TRUE(WriteSnapshot(&env, "/db/copy.vstore", h, views, nullptr).ok());
  ASSERT_TRUE(LoadSnapshot(&env, "/db/copy.vstore", static_cast<RecordSink*>(nullptr), &st).ok());
  EXPECT_EQ(st.ns_tier_refs, 0u);
  EXPECT_EQ(st.rows, 3u + 5u + 2u);                     // every row with bytes (not the gap)
  views[0].layers[0][1].segments[1].tier_offset = 960;  // 960 + 5 rows > 1,024
  ASSERT_TRUE(WriteSnapshot(&env, "/db/bad.vstore", h, views, nullptr, nullptr, &wo).ok());
  Status bad = LoadSnapshot(&env, "/db/bad.vstore", static_cast<RecordSink*>(nullptr), &st);
  EXPECT_EQ(bad.code(), Code::kCorruption);
  auto old = gsnap;  // the golden file claiming version 7
  PutU32(old.data() + 8, 7);
  PutU32(old.data() + 60, crc32c::Value(old.data(), 60));
  env2.SetFile("/db/v7.vstore", old);
  bad = LoadSnapshot(&env2, "/db/v7.vstore", static_cast<RecordSink*>(nullptr), &st);
  EXPECT_EQ(bad.code(), Code::kCorruption);
  EXPECT_NE(bad.message().find("namespace_tier section before version 8"), std::string::npos);
}

}  // namespace
}  // namespace pion::persist
