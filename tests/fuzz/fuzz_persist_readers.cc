// libFuzzer target for the WAL and snapshot readers (product.md §15): the input
// is one file; it is read as a WAL (every record, then the end classification
// with its forward search) and verified as a snapshot. Malformed input must give
// a Corruption status, never a crash, a hang or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "persist/fault_env.h"
#include "persist/snapshot.h"
#include "persist/wal_format.h"
#include "persist/wal_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pion::persist;
  static FaultEnv* env = new FaultEnv();
  std::vector<uint8_t> bytes(data, data + size);
  // The same bytes behind a valid WAL header too, so the record parser is reached.
  std::vector<uint8_t> wal(kWalHeaderSize);
  EncodeWalHeader({1, 1}, wal.data());
  wal.insert(wal.end(), data, data + size);
  env->SetFile("/f/raw", bytes);
  env->SetFile("/f/wal", wal);
  for (const char* p : {"/f/raw", "/f/wal"}) {
    auto r = WalReader::Open(env, p);
    if (!r.ok()) continue;
    WalRecord rec;
    while ((*r)->Next(&rec)) {
    }
  }
  SnapshotStats st;
  (void)LoadSnapshot(env, "/f/raw", nullptr, &st);
  return 0;
}
