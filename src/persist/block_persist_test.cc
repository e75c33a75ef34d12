// KV.BLOCK.CHAIN on disk: the STRCHAIN record (WAL version 4) and BLOCK
// sections (snapshot version 5): codecs, restart through the WAL and through a
// snapshot (links, hashes, tokens survive; removals make children roots), and
// the golden files golden_v4_blocks.wal / golden_v5.vstore (older versions now:
// they still load, and today's writer gives the same bytes after the header).
#include <gtest/gtest.h>

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
#include "persist/wal_writer.h"
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

struct BlockNode {
  explicit BlockNode(Env* env) : store(StoreConfig{}) {
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

std::string U64s(std::initializer_list<uint64_t> v) {
  std::string s(v.size() * 8, '\0');
  size_t i = 0;
  for (uint64_t x : v) std::memcpy(&s[8 * i++], &x, 8);
  return s;
}

void Chain(Store& s, std::initializer_list<std::string_view> kv, Store::ChainArgs a = {}) {
  std::vector<std::string_view> v(kv);
  uint64_t lsn = 0;
  Status st = store::OpBlockChain({s, &lsn}, v, a);
  PION_CHECK_MSG(st.ok(), std::string(st.message()).c_str());
}

// A chain workload: a root string, a chain after it with hashes and tokens, a
// second chain with a TTL, a SET over a chained key (links kept), a DEL in the
// middle (its child becomes a root), a RENAME of a chained key (links move),
// and a chain whose AFTER key is missing.
void GoldenChainWorkload(Store& s) {
  uint64_t lsn = 0;
  store::SetOptions o;
  PION_CHECK(store::OpSet({s, &lsn}, "root", store::StrValue::Copy("r"), o).ok());
  const std::string h = U64s({11, 12, 13});
  Store::ChainArgs a;
  a.after = "root";
  a.has_after = true;
  a.hashes = h;
  a.tokens = 16;
  Chain(s, {"b1", "v1", "b2", "v2", "b3", "v3"}, a);
  Store::ChainArgs t;
  t.expire_at_ms = kFarExpireMs;
  Chain(s, {"t1", "x", "t2", "y"}, t);
  PION_CHECK(store::OpSet({s, &lsn}, "b1", store::StrValue::Copy("v1bis"), o).ok());
  std::string_view del[] = {"b2"};
  PION_CHECK(store::OpDelete({s, &lsn}, del).ok());
  bool done = false;
  PION_CHECK(store::OpRename({s, &lsn}, "t1", "t1moved", false, &done).ok());
  Store::ChainArgs m;
  m.after = "absent";
  m.has_after = true;
  Chain(s, {"m1", std::string_view("\0\1", 2)}, m);
}

void ExpectWorkloadLinks(Store& s) {
  Store::BlockInfo i;
  ASSERT_TRUE(store::OpDescribeBlock({s}, "b1", &i));
  EXPECT_EQ(i.parent, "root");
  EXPECT_EQ(i.hash, 11u);
  EXPECT_EQ(i.tokens, 16u);
  ASSERT_TRUE(store::OpDescribeBlock({s}, "b3", &i));
  EXPECT_EQ(i.parent, "");  // b2 was deleted
  EXPECT_EQ(i.hash, 13u);
  ASSERT_TRUE(store::OpDescribeBlock({s}, "t2", &i));
  EXPECT_EQ(i.parent, "t1moved");
  EXPECT_FALSE(i.has_hash);
  ASSERT_TRUE(store::OpDescribeBlock({s}, "m1", &i));
  EXPECT_EQ(i.parent, "");
  EXPECT_FALSE(store::OpDescribeBlock({s}, "b2", &i));
}

TEST(BlockFormat, StrChainRoundTripAndChecks) {
  StrChainEntry e[2] = {{"k1", 5, 3, {}}, {"k2", 6, 0, {}}};
  StrChainRecord r;
  r.after = "p";
  r.has_after = true;
  r.has_hashes = true;
  r.tokens = 16;
  r.expire_at_ms = 77;
  r.entries = e;
  std::vector<uint8_t> p;
  EncodeStrChainPrefix(r, &p);
  p.insert(p.end(), {'a', 'b', 'c'});
  StrChainRecord d;
  std::vector<StrChainEntry> entries;
  ASSERT_TRUE(DecodeStrChain(p, &d, &entries).ok());
  EXPECT_EQ(d.after, "p");
  EXPECT_TRUE(d.has_after && d.has_hashes);
  EXPECT_EQ(d.tokens, 16u);
  EXPECT_EQ(d.expire_at_ms, 77);
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[0].key, "k1");
  EXPECT_EQ(d.entries[1].hash, 6u);
  EXPECT_EQ(std::string(d.entries[0].value.begin(), d.entries[0].value.end()), "abc");
  EXPECT_TRUE(d.entries[1].value.empty());
  EXPECT_TRUE(ValidateWalPayload(RecordType::kStrChain, p).ok());
  // A value byte too many or too few, a bad flag, a zero count: corrupt.
  auto more = p;
  more.push_back('x');
  EXPECT_FALSE(DecodeStrChain(more, &d, &entries).ok());
  auto less = p;
  less.pop_back();
  EXPECT_FALSE(DecodeStrChain(less, &d, &entries).ok());
  auto flags = p;
  flags[0] = 8;  // bit 2 is has_format since version 5
  EXPECT_FALSE(DecodeStrChain(flags, &d, &entries).ok());
  StrChainRecord none;
  std::vector<uint8_t> q;
  EncodeStrChainPrefix(none, &q);
  EXPECT_FALSE(DecodeStrChain(q, &d, &entries).ok());
}

TEST(BlockFormat, SnapBlockRoundTrip) {
  StrBlockRecord r;
  r.key = "k";
  r.parent = "p";
  r.has_parent = true;
  r.has_hash = true;
  r.hash = 9;
  r.tokens = 3;
  std::vector<uint8_t> p;
  EncodeSnapBlock(r, &p);
  StrBlockRecord d;
  ASSERT_TRUE(DecodeSnapBlock(p, &d).ok());
  EXPECT_EQ(d.key, "k");
  EXPECT_EQ(d.parent, "p");
  EXPECT_TRUE(d.has_parent && d.has_hash);
  EXPECT_EQ(d.hash, 9u);
  EXPECT_EQ(d.tokens, 3u);
  p.push_back(0);
  EXPECT_FALSE(DecodeSnapBlock(p, &d).ok());
}

TEST(BlockPersist, RestartKeepsLinksHashesAndTokens) {
  FaultEnv env;
  StoreDump want;
  {
    BlockNode n(&env);
    GoldenChainWorkload(n.store);
    ASSERT_TRUE(n.persist->Commit().ok());
    want = Dump(n.store);
  }
  EXPECT_NE(want["string:b1"].find(" block parent=root hash=11 tokens=16"), std::string::npos)
      << want["string:b1"];
  {
    BlockNode m(&env);  // from the WAL
    EXPECT_EQ(Dump(m.store), want);
    ExpectWorkloadLinks(m.store);
    ASSERT_TRUE(m.persist->Save("").ok());
  }
  BlockNode k(&env);  // from the snapshot
  EXPECT_EQ(Dump(k.store), want);
  ExpectWorkloadLinks(k.store);
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

TEST(Golden, Version4BlocksWalAndVersion5SnapshotStillMatchAndLoad) {
  FaultEnv env;
  StoreDump want;
  {
    BlockNode n(&env);
    GoldenChainWorkload(n.store);
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
  // (No longer today's versions: PION_WRITE_GOLDEN rewrites only the newest
  // golden files, quant_persist_test.cc's.)
  auto gwal = ReadAll(dir + "/golden_v4_blocks.wal");
  auto gsnap = ReadAll(dir + "/golden_v5.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v4_blocks.wal";
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v5.vstore";
  ASSERT_EQ(GetU32(gwal.data() + 8), 4u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 5u);
  // Today's files are WAL version 5 / snapshot version 6 (quantized blocks,
  // quant_persist_test.cc); this workload has none, so the bytes after the
  // file header (whose version, and so CRC, differs) are unchanged.
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
  {
    FaultEnv env2;
    env2.SetFile(kWal, gwal);
    BlockNode m(&env2);
    EXPECT_EQ(Dump(m.store), want);
    ExpectWorkloadLinks(m.store);
  }
  FaultEnv env3;
  env3.SetFile(kSnap, gsnap);
  BlockNode k(&env3);
  EXPECT_EQ(Dump(k.store), want);
  ExpectWorkloadLinks(k.store);

  // Today's writer re-encodes the golden WAL's STRCHAIN records to the same bytes.
  FaultEnv env4;
  env4.SetFile("/g/in.wal", gwal);
  auto rd = WalReader::Open(&env4, "/g/in.wal");
  ASSERT_TRUE(rd.ok());
  WalRecord rec;
  int chains = 0;
  while ((*rd)->Next(&rec)) {
    if (rec.type != RecordType::kStrChain) continue;
    StrChainRecord r;
    std::vector<StrChainEntry> entries;
    ASSERT_TRUE(DecodeStrChain(rec.payload, &r, &entries).ok());
    std::vector<uint8_t> p;
    EncodeStrChainPrefix(r, &p);
    for (const auto& e : r.entries) p.insert(p.end(), e.value.begin(), e.value.end());
    EXPECT_EQ(p, std::vector<uint8_t>(rec.payload.begin(), rec.payload.end()));
    ++chains;
  }
  EXPECT_EQ(chains, 3);
}

}  // namespace
}  // namespace pion::persist
