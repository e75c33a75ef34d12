// libFuzzer target for the WAL and snapshot readers. Malformed
// input must give a Corruption status, never a crash, a hang or an unbounded
// allocation. The first input byte picks the mode:
//
//  even: the rest is one file, read as a WAL (every record, then the end
//        classification with its forward search), the same bytes behind a valid
//        WAL header, and verified as a snapshot. Random bytes rarely pass the
//        record CRC, so this mode mostly exercises the framing.
//  odd:  the rest is a list of records, each [type u8][length u32 LE][payload],
//        the length cut to the bytes left. The harness frames them with correct
//        headers, sequence numbers and CRCs, so every payload reaches its decoder:
//        as a WAL (ValidateWalPayload), as a snapshot loaded into a real Store
//        (DecodeSnapNamespace / DecodeStore / DecodeSnapEnd / DecodeSnapNamespaceTier,
//        then RecordSink::Apply; a namespace_tier reference without a tier drops
//        the namespace), and through every decoder directly.
//
// Seeds: tests/fuzz/corpus/persist (tests/fuzz/make_persist_seeds.py).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "persist/snapshot.h"
#include "persist/testing/fault_env.h"
#include "persist/wal_format.h"
#include "persist/wal_reader.h"
#include "store/persist_adapter.h"
#include "store/store.h"

namespace {

using namespace pion::persist;

constexpr uint64_t kGeneration = 7;

struct Rec {
  uint8_t type;
  std::span<const uint8_t> payload;
};

// Type bytes below 0xF0 map onto the real record types (the first seven
// as before version 2, so older seeds keep their meaning); the rest stay raw
// (unknown types).
uint8_t MapType(uint8_t b) {
  static constexpr RecordType kTypes[] = {RecordType::kRegister,
                                          RecordType::kStore,
                                          RecordType::kDrop,
                                          RecordType::kFlushAll,
                                          RecordType::kSnapNamespace,
                                          RecordType::kSnapRows,
                                          RecordType::kSnapEnd,
                                          RecordType::kStrSet,
                                          RecordType::kStrDel,
                                          RecordType::kStrExpire,
                                          RecordType::kStrRename,
                                          RecordType::kSnapString,
                                          RecordType::kRegisterChild,
                                          RecordType::kSnapNamespaceChild,
                                          RecordType::kStrChain,
                                          RecordType::kSnapBlock,
                                          RecordType::kSnapQuant,
                                          RecordType::kSnapStringTier,
                                          RecordType::kSnapNamespaceTier};
  constexpr size_t n = sizeof(kTypes) / sizeof(kTypes[0]);
  return b < 0xF0 ? static_cast<uint8_t>(kTypes[b % n]) : b;
}

std::vector<Rec> SplitRecords(const uint8_t* p, size_t n) {
  std::vector<Rec> out;
  while (n >= 5 && out.size() < 4096) {
    uint8_t type = MapType(p[0]);
    uint64_t len = GetU32(p + 1);
    p += 5;
    n -= 5;
    if (len > n) len = n;
    out.push_back({type, {p, static_cast<size_t>(len)}});
    p += len;
    n -= len;
  }
  return out;
}

void AppendFramed(std::vector<uint8_t>* file, uint8_t type, uint64_t seq,
                  std::span<const uint8_t> payload) {
  uint8_t hdr[kRecordHeaderSize];
  EncodeRecordHeader(hdr, static_cast<RecordType>(type), seq,
                     static_cast<uint32_t>(payload.size()));
  std::span<const uint8_t> pieces[1] = {payload};
  PutU32(hdr, RecordCrc(kGeneration, hdr, pieces));
  file->insert(file->end(), hdr, hdr + kRecordHeaderSize);
  file->insert(file->end(), payload.begin(), payload.end());
}

void ReadWal(FaultEnv* env, const char* path) {
  auto r = WalReader::Open(env, path);
  if (!r.ok()) return;
  WalRecord rec;
  while ((*r)->Next(&rec)) {
  }
}

void RawMode(FaultEnv* env, const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  std::vector<uint8_t> wal(kWalHeaderSize);
  EncodeWalHeader({kGeneration, 1}, wal.data());
  wal.insert(wal.end(), data, data + size);
  env->SetFile("/f/raw", bytes);
  env->SetFile("/f/wal", wal);
  ReadWal(env, "/f/raw");
  ReadWal(env, "/f/wal");
  SnapshotStats st;
  (void)LoadSnapshot(env, "/f/raw", nullptr, &st);
}

void FramedMode(FaultEnv* env, const uint8_t* data, size_t size) {
  const std::vector<Rec> recs = SplitRecords(data, size);

  std::vector<uint8_t> wal(kWalHeaderSize);
  EncodeWalHeader({kGeneration, 1}, wal.data());
  for (size_t i = 0; i < recs.size(); ++i) AppendFramed(&wal, recs[i].type, 1 + i, recs[i].payload);
  env->SetFile("/f/wal", wal);
  ReadWal(env, "/f/wal");

  SnapHeader sh;
  sh.generation = kGeneration;
  for (const Rec& r : recs)
    sh.namespace_count += r.type == static_cast<uint8_t>(RecordType::kSnapNamespace) ||
                          r.type == static_cast<uint8_t>(RecordType::kSnapNamespaceChild);
  std::vector<uint8_t> snap(kSnapHeaderSize);
  EncodeSnapHeader(sh, snap.data());
  for (size_t i = 0; i < recs.size(); ++i)
    AppendFramed(&snap, recs[i].type, 1 + i, recs[i].payload);
  env->SetFile("/f/snap", snap);
  SnapshotStats st;
  (void)LoadSnapshot(env, "/f/snap", nullptr, &st);
  // Applied to a store with a byte budget, so the rows a record declares stay bounded;
  // mapped (FaultEnv maps into aligned memory), so aligned rows become borrowed chunks.
  pion::store::Store store({/*max_sessions=*/16, /*max_bytes=*/64ull << 20});
  (void)LoadSnapshot(env, "/f/snap", &store, &st, nullptr, /*map=*/true);

  for (const Rec& r : recs) {
    RegisterRec reg;
    StoreRec sto;
    DropRec drop;
    SnapEndRec end;
    StrTierRecord tier;
    NsTierRecord ns_tier;
    (void)DecodeRegister(r.payload, &reg);
    (void)DecodeSnapStringTier(r.payload, &tier);
    (void)DecodeSnapNamespaceTier(r.payload, &ns_tier);
    (void)DecodeSnapNamespace(r.payload, &reg);
    (void)DecodeRegisterChild(r.payload, &reg);
    (void)DecodeSnapNamespaceChild(r.payload, &reg);
    (void)DecodeStore(r.payload, &sto);
    (void)DecodeDrop(r.payload, &drop);
    (void)DecodeSnapEnd(r.payload, &end);
    (void)ValidateWalPayload(static_cast<RecordType>(r.type), r.payload);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static FaultEnv* env = new FaultEnv();
  if (data[0] & 1) {
    FramedMode(env, data + 1, size - 1);
  } else {
    RawMode(env, data + 1, size - 1);
  }
  return 0;
}
