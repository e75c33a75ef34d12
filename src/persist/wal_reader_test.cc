// Unit tests of the on-disk formats as read back: fixed format tags and the
// WAL header, the WAL reader's end-of-log rules (corruption offset, resync, a
// hole versus garbage), and the golden files of every format version
// (tests/testdata): older files still load, today's writers reproduce the
// newest bytes.
#include "persist/wal_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "persist/snapshot.h"
#include "persist/testing/persist_fixture.h"
#include "persist/wal_writer.h"
#include "store/key_ops.h"
#include "store/persist_adapter.h"
#include "store/prefix_ops.h"
#include "store/string_ops.h"

namespace pion::persist {
namespace {

using store::Store;
using store::StoreConfig;
using testing::Dump;
using testing::Fill;
using testing::kAllFormats;
using testing::kSnap;
using testing::kWal;
using testing::Node;
using testing::StoreDump;
using testing::WriteThree;

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

// Golden files: tests/testdata/golden_v1.wal and golden_v1.vstore are produced by
// this deterministic workload (PION_WRITE_GOLDEN=1 rewrites them). The test checks
// that today's writer produces the same bytes and today's reader loads them.
void GoldenWorkload(Store& s) {
  uint64_t lsn = 0;
  for (size_t i = 0; i < std::size(kAllFormats); ++i)
    PION_CHECK(
        Fill(s, "g" + std::to_string(i), kAllFormats[i], 32, 2, 0, 3, 100 + i, &lsn, i == 0).ok());
  std::string_view drop[] = {"g2"};
  PION_CHECK(store::OpDrop({s, &lsn}, drop).ok());
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
    PION_CHECK(store::OpSet({s, &lsn}, k, store::StrValue::Copy(v), o).ok());
  };
  set("s:plain", "hello", 0);
  set("s:ttl", std::string(300, 'x'), kGoldenExpireMs);
  set("s:empty", "", 0);
  set("s:gone", "bye", 0);
  set("s:moved", "value that moves", kGoldenExpireMs + 1000);
  PION_CHECK(store::OpAppend({s, &lsn}, "s:plain", " world").ok());
  PION_CHECK(
      store::OpExpire({s, &lsn}, "s:plain", kGoldenExpireMs + 5, store::ExpireCond::kAlways).ok());
  PION_CHECK(store::OpPersist({s, &lsn}, "s:plain").ok());
  bool done = false;
  PION_CHECK(store::OpRename({s, &lsn}, "s:moved", "s:dest", false, &done).ok());
  std::string_view del[] = {"s:gone"};
  PION_CHECK(store::OpDelete({s, &lsn}, del).ok());
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
    PION_CHECK(store::OpRegister({s, &l}, ra).ok());
    // Rows: register again without PARENT is what Fill does (keeps the link).
    PION_CHECK(Fill(s, ns, f, 32, 1, 0, 2, seed, &lsn, false).ok());
  };
  PION_CHECK(Fill(s, "chain:root", quant::Format::kFp16, 32, 1, 0, 4, 500, &lsn, false).ok());
  child("chain:c1", "chain:root", quant::Format::kFp16, 501, true);
  child("chain:c2", "chain:c1", quant::Format::kInt8, 502, false);
  child("chain:c1b", "chain:root", quant::Format::kFp16, 503, false);
  child("chain:c1b:x", "chain:c1b", quant::Format::kFp16, 504, false);
  std::string_view drop[] = {"chain:c1b"};
  PION_CHECK(store::OpDrop({s, &lsn}, drop).ok());  // two DROP records, leaf first
  PION_CHECK(Fill(s, "other:root", quant::Format::kTurbo4, 32, 1, 0, 2, 505, &lsn, false).ok());
  child("other:t1", "other:root", quant::Format::kTurbo4, 506, false);
}

TEST(Golden, Version4WalAndVersion4SnapshotMatchAndLoad) {
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
  // The WAL is version 4 (STRPATCH: the workload's APPEND) since golden_v4.wal;
  // snapshots are version 4 (PAD sections) since golden_v4.vstore. The version 3
  // files of the same workload still load to the same state.
  // (golden_v4.vstore is no longer today's version: only the WAL is rewritten.)
  // (golden_v4.wal is no longer today's version either: WAL version 5 adds
  // quantized blocks, quant_persist_test.cc; nothing is rewritten here.)
  auto gwal = ReadAll(dir + "/golden_v4.wal");
  auto gwal3 = ReadAll(dir + "/golden_v3.wal");
  auto gsnap3 = ReadAll(dir + "/golden_v3.vstore");
  auto gsnap = ReadAll(dir + "/golden_v4.vstore");
  ASSERT_FALSE(gwal.empty()) << "missing " << dir << "/golden_v4.wal";
  ASSERT_FALSE(gsnap.empty()) << "missing " << dir << "/golden_v4.vstore";
  ASSERT_EQ(GetU32(gwal.data() + 8), 4u);
  ASSERT_EQ(GetU32(gwal3.data() + 8), 3u);
  ASSERT_EQ(GetU32(gsnap3.data() + 8), 3u);
  ASSERT_EQ(GetU32(gsnap.data() + 8), 4u);
  // WAL version 5 (STRCHAIN has_format) writes this workload's records as
  // version 4 did: the bytes after the file header are unchanged.
  ASSERT_GE(wal.size(), kWalHeaderSize);
  EXPECT_EQ(GetU32(wal.data() + 8), kWalVersion);
  EXPECT_TRUE(std::equal(gwal.begin() + kWalHeaderSize, gwal.end(), wal.begin() + kWalHeaderSize,
                         wal.end()))
      << "WAL bytes changed: a format change needs a new version";
  // Snapshots are version 5 (BLOCK sections, block_persist_test.cc) since
  // golden_v5.vstore; this workload writes none, so today's bytes equal
  // golden_v4.vstore's after the file header (whose version, and so CRC, differs).
  ASSERT_GE(snap.size(), kSnapHeaderSize);
  EXPECT_EQ(GetU32(snap.data() + 8), kSnapVersion);
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         snap.begin() + kSnapHeaderSize, snap.end()))
      << "snapshot bytes changed: a format change needs a new version";
  for (const auto* g : {&gwal, &gwal3}) {
    FaultEnv env2;
    env2.SetFile(kWal, *g);
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

// Kernel-independent format stability: re-encoding the records of the golden
// WAL with today's writer, and re-writing the state loaded from the golden
// snapshot with today's snapshot writer, give the same bytes.
TEST(Golden, WriterReproducesGoldenBytesFromDecodedRecords) {
  const std::string dir = PION_TESTDATA_DIR;
  auto gwal = ReadAll(dir + "/golden_v4.wal");
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
      Record r;
      DecodeScratch scratch;
      ASSERT_TRUE(DecodeWal(rec.type, rec.payload, &r, &scratch).ok());
      ASSERT_TRUE(w.Log(r).ok());
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
  // The same sections; only the file header's version (and CRC) is today's.
  auto out_snap = env.GetFile("/g/out.vstore");
  ASSERT_GE(out_snap.size(), kSnapHeaderSize);
  EXPECT_TRUE(std::equal(gsnap.begin() + kSnapHeaderSize, gsnap.end(),
                         out_snap.begin() + kSnapHeaderSize, out_snap.end()));
}

}  // namespace
}  // namespace pion::persist
