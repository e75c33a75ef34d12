// The disk tier's write jobs as they come back from an I/O thread (store/
// tiering.cc, store/tier_namespaces.cc): what was moved, where it went, and
// whether the write worked. The next holder of Keyspace::mu applies them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/chunk.h"
#include "store/strings.h"
#include "tier/tier_file.h"

namespace pion::store {

class Namespace;

// A string value's move: `moving` (the entry's value while the write ran,
// pointing at the RAM bytes of `ram`) becomes one that reads the extent.
struct TierDone {
  std::string key;
  StrRef ram, moving;
  Status status;
};

// A chunk of a namespace written to the namespace's extent.
struct TierChunk {
  uint8_t side = 0;
  uint32_t layer = 0;
  uint64_t index = 0;
  std::shared_ptr<Chunk> chunk;
  uint64_t offset = 0;  // in the extent's value (64-byte aligned)
};

// A namespace's move: every chunk of both sides in one extent.
struct TierNsDone {
  std::shared_ptr<Namespace> ns;
  tier::ExtentRef extent;
  std::vector<TierChunk> chunks;
  Status status;
};

}  // namespace pion::store
