// pion-check <file>: verifies a pion WAL or snapshot (told apart by the magic
// number) and prints what it holds: generation, LSNs, namespaces, rows, bytes,
// and the first bad offset. Exit status 0 if the file is entirely valid (a WAL
// may end in records of an earlier generation: a recycled file's old contents,
// which the server cuts off at start), 1 if not (including a torn WAL tail,
// which the server would cut off at start), 2
// for a usage or I/O error. Formats: docs/wal_format.md, docs/snapshot_format.md.
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "persist/env.h"
#include "persist/snapshot.h"
#include "persist/wal_format.h"
#include "persist/wal_reader.h"

namespace pion::persist {
namespace {

int CheckWal(Env* env, const std::string& path) {
  auto r = WalReader::Open(env, path);
  if (!r.ok()) {
    std::printf("file: %s\ntype: WAL\nstatus: BAD\nfirst_bad_offset: 0\nreason: %s\n", path.c_str(),
                std::string(r.status().message()).c_str());
    return 1;
  }
  WalReader& rd = **r;
  uint64_t counts[kMaxWalRecordType + 1] = {};  // by record type (the reader checks the range)
  uint64_t rows = 0, row_bytes = 0;
  std::set<std::string> names;
  WalRecord rec;
  while (rd.Next(&rec)) {
    counts[static_cast<int>(rec.type)]++;
    if (rec.type == RecordType::kRegister || rec.type == RecordType::kRegisterChild) {
      RegisterRec rr;
      Status s = rec.type == RecordType::kRegister ? DecodeRegister(rec.payload, &rr)
                                                   : DecodeRegisterChild(rec.payload, &rr);
      if (s.ok()) names.insert(std::string(rr.ns));
    } else if (rec.type == RecordType::kStore) {
      StoreRec sr;
      if (DecodeStore(rec.payload, &sr).ok()) {
        rows += sr.count;
        row_bytes += sr.rows.size();
      }
    }
  }
  if (!rd.status().ok()) {
    std::fprintf(stderr, "pion-check: %s\n", rd.status().ToString().c_str());
    return 2;
  }
  uint64_t records = counts[1] + counts[2] + counts[3] + counts[4] + counts[9];
  std::printf("file: %s\ntype: WAL\nversion: %u\ngeneration: %llu\nfirst_lsn: %llu\n", path.c_str(),
              kWalVersion, static_cast<unsigned long long>(rd.header().generation),
              static_cast<unsigned long long>(rd.header().first_lsn));
  std::printf("records: %llu (register %llu, store %llu, drop %llu, flushall %llu)\n",
              static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(counts[1] + counts[9]),
              static_cast<unsigned long long>(counts[2]),
              static_cast<unsigned long long>(counts[3]),
              static_cast<unsigned long long>(counts[4]));
  std::printf(
      "last_lsn: %llu\nnamespaces: %zu\nsessions: %zu\nrows: %llu\nrow_bytes: %llu\n"
      "valid_bytes: %llu\nfile_bytes: %llu\n",
      static_cast<unsigned long long>(rd.next_lsn() - 1), names.size(), names.size() * 2,
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(row_bytes),
      static_cast<unsigned long long>(rd.end_offset()),
      static_cast<unsigned long long>(rd.file_size()));
  switch (rd.end()) {
    case WalEnd::kClean:
      std::printf("status: OK\n");
      return 0;
    case WalEnd::kStale:
      std::printf(
          "status: OK (the records end at first_bad_offset; records of generation %llu, the "
          "file's earlier use, follow at next_valid_offset; the server truncates them at start)\n"
          "first_bad_offset: %llu\nnext_valid_offset: %llu\n",
          static_cast<unsigned long long>(rd.stale_generation()),
          static_cast<unsigned long long>(rd.end_offset()),
          static_cast<unsigned long long>(rd.resync_offset()));
      return 0;
    case WalEnd::kTorn:
      std::printf(
          "status: BAD (torn tail; the server truncates it at start)\n"
          "first_bad_offset: %llu\nreason: %s\n",
          static_cast<unsigned long long>(rd.end_offset()), rd.reason().c_str());
      return 1;
    case WalEnd::kCorrupt:
      std::printf(
          "status: BAD (corrupt; the server refuses to start without --wal-repair)\n"
          "first_bad_offset: %llu\nreason: %s\nnext_valid_offset: %llu\n",
          static_cast<unsigned long long>(rd.end_offset()), rd.reason().c_str(),
          static_cast<unsigned long long>(rd.resync_offset()));
      return 1;
  }
  return 1;
}

int CheckSnapshot(Env* env, const std::string& path) {
  SnapshotStats st;
  uint64_t bad = 0;
  Status s = LoadSnapshot(env, path, nullptr, &st, &bad);
  std::printf("file: %s\ntype: snapshot\nversion: %u\n", path.c_str(), kSnapVersion);
  if (!s.ok() && s.code() != Code::kCorruption) {
    std::fprintf(stderr, "pion-check: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf(
      "generation: %llu\nnext_lsn: %llu\ncreated_unix: %llu\nnamespaces: %llu\n"
      "sessions: %llu\nrows: %llu\nrow_bytes: %llu\nsections: %llu\n",
      static_cast<unsigned long long>(st.header.generation),
      static_cast<unsigned long long>(st.header.next_lsn),
      static_cast<unsigned long long>(st.header.created_unix),
      static_cast<unsigned long long>(st.namespaces),
      static_cast<unsigned long long>(st.namespaces * 2), static_cast<unsigned long long>(st.rows),
      static_cast<unsigned long long>(st.row_bytes), static_cast<unsigned long long>(st.sections));
  if (!s.ok()) {
    std::printf("status: BAD\nfirst_bad_offset: %llu\nreason: %s\n",
                static_cast<unsigned long long>(bad), std::string(s.message()).c_str());
    return 1;
  }
  std::printf("file_bytes: %llu\nstatus: OK\n", static_cast<unsigned long long>(st.file_bytes));
  return 0;
}

}  // namespace
}  // namespace pion::persist

int main(int argc, char** argv) {
  using namespace pion::persist;
  if (argc != 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: pion-check <file>\n"
                 "Verifies a pion WAL (pion.vstore.wal) or snapshot (pion.vstore).\n"
                 "Exit status: 0 valid, 1 invalid (first bad offset printed), 2 error.\n");
    return 2;
  }
  Env* env = PosixEnv();
  std::string path = argv[1];
  auto f = env->NewReadableFile(path);
  if (!f.ok()) {
    std::fprintf(stderr, "pion-check: %s\n", f.status().ToString().c_str());
    return 2;
  }
  uint8_t magic[8] = {0};
  auto n = (*f)->ReadAt(0, 8, magic);
  if (n.ok() && *n == 8 && std::memcmp(magic, kWalMagic, 8) == 0) return CheckWal(env, path);
  if (n.ok() && *n == 8 && std::memcmp(magic, kSnapMagic, 8) == 0) return CheckSnapshot(env, path);
  std::printf(
      "file: %s\nstatus: BAD\nfirst_bad_offset: 0\nreason: not a pion WAL or snapshot "
      "(unknown magic)\n",
      path.c_str());
  return 1;
}
