// Test helpers for persistence tests: a deterministic workload against a store
// and a canonical dump of a store's contents (the stored bytes of every row) to
// compare states bit-exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/persist_adapter.h"
#include "store/store.h"

namespace pion::persist::testing {

// ns -> canonical description (dim, format, incarnation, blocks, every layer's rows).
using StoreDump = std::map<std::string, std::string>;
StoreDump Dump(store::Store& s);

// Registers `ns` (optionally with a block table) and stores `rows` rows into
// `layers` layers of both sides with values derived from `seed`.
Status Fill(store::Store& s, const std::string& ns, quant::Format fmt, uint32_t dim,
            uint32_t layers, uint64_t start, uint64_t rows, uint64_t seed, uint64_t* lsn,
            bool blocks = false);

}  // namespace pion::persist::testing
