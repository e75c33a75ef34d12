// pion-check <file>: verifies a pion WAL or snapshot (told apart by the magic
// number) and prints what it holds: generation, LSNs, namespaces, rows, bytes,
// and the first bad offset. Given a disk tier file (pion-tier.dat) or the tier
// directory, it walks the extents (docs/tier_format.md §4) and prints every
// damaged extent and stray run with its offset. Exit status 0 if the file is entirely valid (a WAL
// may end in records of an earlier generation: a recycled file's old contents,
// which the server cuts off at start), 1 if not (including a torn WAL tail,
// which the server would cut off at start), 2
// for a usage or I/O error. Formats: docs/wal_format.md, docs/snapshot_format.md,
// docs/tier_format.md.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "persist/env.h"
#include "persist/snapshot.h"
#include "persist/wal_format.h"
#include "persist/wal_reader.h"
#include "tier/tier_check.h"
#include "tier/tier_file.h"

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

// Collects a snapshot's STRING_TIER and NAMESPACE_TIER references (everything
// else is ignored).
class TierRefs final : public RecordSink {
 public:
  struct Ref {
    std::string key;  // the key, or the namespace's name
    bool ns = false;  // a namespace's extent
    pion::tier::ExtentId id;
  };
  std::vector<Ref> refs;
  Status Apply(const pion::persist::Record& rec) override {
    if (const auto* r = std::get_if<StrTierRecord>(&rec))
      Add(r->key, false, r->extent, r->value_len);
    else if (const auto* n = std::get_if<NsTierRecord>(&rec))
      Add(n->ns, true, n->extent, n->value_len);
    return Status::OK();
  }

 private:
  void Add(std::string_view key, bool ns, const pion::persist::TierExtentRecord& e,
           uint64_t value_len) {
    Ref x;
    x.key.assign(key);
    x.ns = ns;
    x.id.offset = e.offset;
    x.id.length = e.length;
    x.id.header_bytes = e.header_bytes;
    x.id.value_len = value_len;
    x.id.value_crc = e.value_crc;
    x.id.seq = e.seq;
    refs.push_back(std::move(x));
  }
};

std::string Printable(const std::string& k);

// `tier`: the tier file to check the references against (empty: not checked).
int CheckSnapshot(Env* env, const std::string& path, const std::string& tier) {
  SnapshotStats st;
  uint64_t bad = 0;
  TierRefs refs;
  Status s = LoadSnapshot(env, path, &refs, &st, &bad);
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
  std::printf("strings: %llu\ntier_refs: %llu\nns_tier_refs: %llu\ntier_rows: %llu\n",
              static_cast<unsigned long long>(st.strings),
              static_cast<unsigned long long>(st.tier_refs),
              static_cast<unsigned long long>(st.ns_tier_refs),
              static_cast<unsigned long long>(st.tier_rows));
  uint64_t refs_bad = 0;
  if (!tier.empty()) {
    // Each reference as the server checks it at start, and the value's CRC too.
    for (const TierRefs::Ref& r : refs.refs) {
      Status v = pion::tier::TierFile::VerifyExtentAt(tier, r.key, r.id, /*check_value=*/true);
      if (v.code() == Code::kIOError) {
        std::fprintf(stderr, "pion-check: %s\n", v.ToString().c_str());
        return 2;
      }
      if (!v.ok()) {
        ++refs_bad;
        std::printf("tier_ref: offset %llu: %s; %s %s\n",
                    static_cast<unsigned long long>(r.id.offset), std::string(v.message()).c_str(),
                    r.ns ? "namespace" : "key", Printable(r.key).c_str());
      }
    }
    std::printf("tier_file: %s\ntier_refs_bad: %llu\n", tier.c_str(),
                static_cast<unsigned long long>(refs_bad));
  }
  std::printf("file_bytes: %llu\nstatus: %s\n", static_cast<unsigned long long>(st.file_bytes),
              refs_bad == 0 ? "OK" : "BAD (tier references the server would drop)");
  return refs_bad == 0 ? 0 : 1;
}

// A key as printable text: bytes outside printable ASCII as \xHH.
std::string Printable(const std::string& k) {
  std::string out;
  for (unsigned char c : k) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out;
}

int CheckTier(const std::string& path) {
  tier::TierCheckReport rep;
  Status s = tier::CheckTierFile(path, &rep);
  if (!s.ok()) {
    std::fprintf(stderr, "pion-check: %s\n", s.ToString().c_str());
    return 2;
  }
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf(
      "file: %s\ntype: tier\nversion: %u\nfile_bytes: %llu\nextents: %llu\nextent_bytes: %llu\n"
      "value_bytes: %llu\nhole_bytes: %llu\nzero_bytes: %llu\nstray_bytes: %llu\n"
      "damaged_extents: %zu\n",
      path.c_str(), tier::kVersion, u(rep.file_bytes), u(rep.extents), u(rep.extent_bytes),
      u(rep.value_bytes), u(rep.hole_bytes), u(rep.zero_bytes), u(rep.stray_bytes),
      rep.damaged.size());
  for (const auto& d : rep.damaged)
    std::printf("damaged: offset %llu: %s%s%s\n", u(d.offset), d.reason.c_str(),
                d.key.empty() ? "" : "; key ", Printable(d.key).c_str());
  for (const auto& st : rep.stray)
    std::printf("stray: offset %llu: %llu bytes\n", u(st.offset), u(st.bytes));
  if (!rep.ok()) {
    std::printf(
        "status: BAD (the server drops a damaged extent's entry when it reads it)\n"
        "first_bad_offset: %llu\n",
        u(rep.damaged.front().offset));
    return 1;
  }
  if (!rep.stray.empty()) {
    std::printf(
        "status: OK (stray data: blocks that are no extent's; the server empties the "
        "file at start)\n");
    return 0;
  }
  std::printf("status: OK\n");
  return 0;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace
}  // namespace pion::persist

int main(int argc, char** argv) {
  using namespace pion::persist;
  const bool with_tier = argc == 4 && std::strcmp(argv[2], "--tier") == 0;
  if ((argc != 2 && !with_tier) || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: pion-check <file or tier-dir>\n"
                 "       pion-check <snapshot> --tier <tier-dir or tier file>\n"
                 "Verifies a pion WAL (pion.vstore.wal), snapshot (pion.vstore) or disk tier\n"
                 "file (pion-tier.dat, or the tier directory holding it); with --tier, also\n"
                 "the snapshot's references to values in that tier file.\n"
                 "Exit status: 0 valid, 1 invalid (first bad offset printed), 2 error.\n");
    return 2;
  }
  Env* env = PosixEnv();
  std::string path = argv[1];
  struct stat st;
  std::string tier;
  if (with_tier) {
    tier = argv[3];
    if (::stat(tier.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      tier += std::string("/") + pion::tier::kFileName;
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const std::string inside = path + "/" + pion::tier::kFileName;
    if (::stat(inside.c_str(), &st) != 0) {
      std::fprintf(stderr, "pion-check: %s: a directory without %s\n", path.c_str(),
                   pion::tier::kFileName);
      return 2;
    }
    return CheckTier(inside);
  }
  if (EndsWith(path, std::string("/") + pion::tier::kFileName) || path == pion::tier::kFileName)
    return CheckTier(path);
  auto f = env->NewReadableFile(path);
  if (!f.ok()) {
    std::fprintf(stderr, "pion-check: %s\n", f.status().ToString().c_str());
    return 2;
  }
  uint8_t magic[8] = {0};
  auto n = (*f)->ReadAt(0, 8, magic);
  if (n.ok() && *n == 8 && std::memcmp(magic, kWalMagic, 8) == 0) return CheckWal(env, path);
  if (n.ok() && *n == 8 && std::memcmp(magic, kSnapMagic, 8) == 0)
    return CheckSnapshot(env, path, tier);
  if (with_tier) {
    std::fprintf(stderr, "pion-check: --tier goes with a snapshot\n");
    return 2;
  }
  if (n.ok() && *n == 8 && std::memcmp(magic, pion::tier::kMagic, 8) == 0) return CheckTier(path);
  std::printf(
      "file: %s\nstatus: BAD\nfirst_bad_offset: 0\nreason: not a pion WAL, snapshot or tier file "
      "(unknown magic)\n",
      path.c_str());
  return 1;
}
