// Quantized blocks on disk (KV.BLOCK.CHAIN ... FORMAT): STRCHAIN's has_format
// (WAL version 5) and QUANT sections (snapshot version 6): codecs and their
// checks, restart through the WAL and through a snapshot (the format and the
// stored bytes survive; SET over a block leaves plain bytes; RENAME moves the
// format), and the golden files golden_v5_quant.wal / golden_v6.vstore
// (PION_WRITE_GOLDEN=1 rewrites them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "persist/persistence.h"
#include "persist/snapshot.h"
#include "persist/testing/fault_env.h"
#include "persist/testing/test_util.h"
#include "persist/wal_format.h"
#include "persist/wal_reader.h"
#include "store/block_ops.h"
#include "store/key_ops.h"
#include "store/persist_adapter.h"
#include "store/string_ops.h"

namespace pion::persist {
namespace {

using store::Store;
using store::StoreConfig;
using testing::Dump;
using testing::StoreDump;

const std::string kDir = "/db";
const std::string kWal = "/db/pion.vstore.wal";
const std::string kSnap = "/db/pion.vstore";
constexpr int64_t kFarExpireMs = 4102444800000;  // 2100-01-01

struct QuantNode {
  explicit QuantNode(Env* env) : store(StoreConfig{}) {
    PersistOptions o;
    o.dir = kDir;
    o.env = env;
    o.policy = SyncPolicy::kNo;
    o.background = false;
    persist = std::make_unique<Persistence>(&store, o);
    Status st = persist->Recover();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  Store store;
  std::unique_ptr<Persistence> persist;
};

// A stored value of `rows` rows in format `t` (deterministic bytes: the store
// keeps whatever the codecs wrote; their encodings have golden tests of their own).
store::StrRef Stored(const store::QuantTag& t, size_t rows, uint8_t seed) {
  auto v = store::StrValue::TryMake(rows * quant::RowBytes(t.format, t.row));
  PION_CHECK(v != nullptr);
  for (size_t i = 0; i < v->size; ++i) v->data[i] = static_cast<uint8_t>(seed + 7 * i);
  v->quant = t;
  return v;
}

void QuantChain(Store& s, std::vector<std::string_view> keys, const store::QuantTag& t, size_t rows,
                Store::ChainArgs a = {}) {
  std::vector<std::string_view> kv;
  std::vector<store::StrRef> made;
  for (std::string_view k : keys) {
    made.push_back(Stored(t, rows, static_cast<uint8_t>(k.size() + made.size())));
    kv.push_back(k);
    kv.push_back(made.back()->view());
  }
  a.quant = t;
  uint64_t lsn = 0;
  Status st = store::OpBlockChain({s, &lsn}, kv, a, made);
  PION_CHECK_MSG(st.ok(), std::string(st.message()).c_str());
}

// turbo4/bf16 rows of 32 after a plain root, with hashes; fp16/f32 rows of 4
// with a TTL; mlx4g32/f16 rows of 64; SET over one block (plain afterwards);
// RENAME of another (the format moves).
void GoldenQuantWorkload(Store& s) {
  uint64_t lsn = 0;
  store::SetOptions o;
  PION_CHECK(store::OpSet({s, &lsn}, "root", store::StrValue::Copy("r"), o).ok());
  uint64_t h[2] = {21, 22};
  Store::ChainArgs a;
  a.after = "root";
  a.has_after = true;
  a.hashes = std::string_view(reinterpret_cast<const char*>(h), sizeof(h));
  a.tokens = 32;
  QuantChain(s, {"q1", "q2"}, {32, quant::Format::kTurbo4, store::BlockDtype::kBf16}, 3, a);
  Store::ChainArgs t;
  t.expire_at_ms = kFarExpireMs;
  QuantChain(s, {"f1"}, {4, quant::Format::kFp16, store::BlockDtype::kF32}, 2, t);
  QuantChain(s, {"m1", "m2"}, {64, quant::Format::kMlx4g32, store::BlockDtype::kF16}, 1);
  PION_CHECK(store::OpSet({s, &lsn}, "m2", store::StrValue::Copy("plain"), o).ok());
  bool done = false;
  PION_CHECK(store::OpRename({s, &lsn}, "f1", "f1moved", false, &done).ok());
}

void ExpectWorkloadFormats(const StoreDump& d) {
  auto has = [&](const std::string& k, const std::string& what) {
    auto it = d.find("string:" + k);
    return it != d.end() && it->second.find(what) != std::string::npos;
  };
  EXPECT_TRUE(has("q1", " quant=1/1/32"));  // turbo4 (enum 1), bf16, 32
  EXPECT_TRUE(has("q2", " quant=1/1/32"));
  EXPECT_TRUE(has("f1moved", " quant=4/2/4"));
  EXPECT_TRUE(has("m1", " quant=6/0/64"));
  EXPECT_FALSE(has("m2", " quant="));
  EXPECT_FALSE(has("root", " quant="));
  EXPECT_EQ(d.count("string:f1"), 0u);
}

TEST(QuantFormat, StrChainWithFormatRoundTripAndChecks) {
  StrChainEntry e[2] = {{"k1", 0, 22, {}}, {"k2", 0, 44, {}}};
  StrChainRecord r;
  r.quant = {quant::Format::kTurbo4, 1, 32};
  r.entries = e;
  std::vector<uint8_t> p;
  EncodeStrChainPrefix(r, &p);
  p.resize(p.size() + 66, 0x5A);
  StrChainRecord d;
  std::vector<StrChainEntry> entries;
  ASSERT_TRUE(DecodeStrChain(p, &d, &entries).ok());
  EXPECT_EQ(d.quant.format, quant::Format::kTurbo4);
  EXPECT_EQ(d.quant.dtype, 1);
  EXPECT_EQ(d.quant.row, 32u);
  EXPECT_EQ(p[0], 4);   // has_format
  EXPECT_EQ(p[16], 1);  // turbo4's on-disk tag, after flags, tokens and expiry
  EXPECT_TRUE(ValidateWalPayload(RecordType::kStrChain, p).ok());
  auto bad = [&](size_t at, uint8_t v) {
    auto q = p;
    q[at] = v;
    return !DecodeStrChain(q, &d, &entries).ok();
  };
  EXPECT_TRUE(bad(16, 6));   // unknown format tag
  EXPECT_TRUE(bad(17, 3));   // unknown dtype
  EXPECT_TRUE(bad(18, 1));   // reserved
  EXPECT_TRUE(bad(20, 33));  // a row turbo4 does not allow
  // A value that is not whole rows (22 bytes each at turbo4/32).
  StrChainEntry odd[1] = {{"k", 0, 23, {}}};
  r.entries = odd;
  std::vector<uint8_t> q;
  EncodeStrChainPrefix(r, &q);
  q.resize(q.size() + 23);
  EXPECT_FALSE(DecodeStrChain(q, &d, &entries).ok());
  // Without FORMAT the record is exactly a version 4 one.
  r.quant = {};
  r.entries = e;
  std::vector<uint8_t> plain;
  EncodeStrChainPrefix(r, &plain);
  EXPECT_EQ(plain.size() + 8, p.size() - 66);
  EXPECT_EQ(plain[0], 0);
}

TEST(QuantFormat, SnapQuantRoundTripAndChecks) {
  StrQuantRecord r;
  r.key = "key";
  r.quant = {quant::Format::kInt8, 2, 7};
  std::vector<uint8_t> p;
  EncodeSnapQuant(r, &p);
  StrQuantRecord d;
  ASSERT_TRUE(DecodeSnapQuant(p, &d).ok());
  EXPECT_EQ(d.key, "key");
  EXPECT_EQ(d.quant.format, quant::Format::kInt8);
  EXPECT_EQ(d.quant.dtype, 2);
  EXPECT_EQ(d.quant.row, 7u);
  auto more = p;
  more.push_back(0);
  EXPECT_FALSE(DecodeSnapQuant(more, &d).ok());
  auto zero_row = p;
  std::memset(zero_row.data() + zero_row.size() - 4, 0, 4);
  EXPECT_FALSE(DecodeSnapQuant(zero_row, &d).ok());
}

TEST(QuantPersist, RestartKeepsFormatsAndStoredBytes) {
  FaultEnv env;
  StoreDump want;
  {
    QuantNode n(&env);
    GoldenQuantWorkload(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  ExpectWorkloadFormats(want);
  {
    QuantNode m(&env);  // from the WAL
    EXPECT_EQ(Dump(m.store), want);
    ASSERT_TRUE(m.persist->Save("").ok());
  }
  QuantNode k(&env);  // from the snapshot
  EXPECT_EQ(Dump(k.store), want);
  auto v = store::OpGet({k.store}, "q1");
  ASSERT_TRUE(v.ok() && *v != nullptr);
  EXPECT_TRUE((*v)->quantized());
  EXPECT_EQ((*v)->PlainSize(), 3u * 32 * 2);
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

TEST(Golden, Version5QuantWalAndVersion6SnapshotMatchAndLoad) {
  FaultEnv env;
  StoreDump want;
  {
    QuantNode n(&env);
    GoldenQuantWorkload(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
    Status st;
    auto views = n.store.CaptureSnapshot(nullptr, &st);
    auto strings = store::MakePersistHost(&n.store)->TakeCapturedStrings();
    SnapHeader h;
    h.generation = 1;
    h.next_lsn = n.persist->wal()->last_lsn() + 1;
    h.created_unix = 1767225600;  // fixed for reproducible bytes
    h.namespace_count = views.size();
    for (auto& k : strings) h.lru_clock = std::max(h.lru_clock, k.lru_stamp);
    ASSERT_TRUE(WriteSnapshot(&env, "/db/golden.vstore", h, views, nullptr, &strings).ok());
  }
  auto wal = env.GetFile(kWal);
  auto snap = env.GetFile("/db/golden.vstore");
  const std::string dir = PION_TESTDATA_DIR;
  // The snapshot is no longer today's version (version 7 adds STRING_TIER
  // sections, tier_restart_test.cc): PION_WRITE_GOLDEN rewrites only the WAL.
  if (std::getenv("PION_WRITE_GOLDEN")) {
    std::ofstream(dir + "/golden_v5_quant.wal", std::ios::binary)
        .write(reinterpret_cast<const char*>(wal.data()), static_cast<long>(wal.size()));
  }
  auto gwal = ReadAll(dir + "/golden_v5_quant.wal");
  auto gsnap = ReadAll(dir + "/golden_v6.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v5_quant.wal";
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v6.vstore";
  ASSERT_EQ(GetU32(gwal.data() + 8), 5u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 6u);
  EXPECT_EQ(gwal, wal) << "WAL bytes changed: a format change needs a new version";
  // This workload has no value in a disk tier, so today's bytes equal the
  // golden file's after the file header (whose version, and so CRC, differs).
  ASSERT_GE(snap.size(), kSnapHeaderSize);
  EXPECT_EQ(GetU32(snap.data() + 8), kSnapVersion);
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         snap.begin() + kSnapHeaderSize, snap.end()))
      << "snapshot bytes changed: a format change needs a new version";
  {
    FaultEnv env2;
    env2.SetFile(kWal, gwal);
    QuantNode m(&env2);
    EXPECT_EQ(Dump(m.store), want);
  }
  FaultEnv env3;
  env3.SetFile(kSnap, gsnap);
  QuantNode k(&env3);
  EXPECT_EQ(Dump(k.store), want);
}

}  // namespace
}  // namespace pion::persist
