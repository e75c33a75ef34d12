// Why an attend call failed (carried by a Status next to its code, base/status.h),
// with the fields each value names. attend words nothing for clients: the command
// layer's error table (src/kvproto/errors.cc) does; the Status message is
// for logs. Header-only: the Redis module's error table names it without linking attend.
#pragma once

#include <cstdint>
#include <string_view>

namespace pion::attend {

// Which tensor a row belongs to (a field of kNonFinite / kF16Range).
enum class Tensor : uint8_t { kK = 0, kV = 1 };

enum class Reason : uint16_t {
  kNone = 0,
  // Storing a slot (ATTEND.PREFIX.STORE, KV.PREFIX.WARM).
  kNonFinite,       // inf or NaN: fields tensor (Tensor), head, token
  kF16Range,        // beyond binary16 in an f16 slot: fields tensor, head, token
  kHeadsRange,      // H outside 1..max: fields max
  kHeadDimRange,    // D outside 1..max: fields max
  kRowSize,         // H*D is no row size of the stored format: fields kv_dim, quant::Format
  kRowCountDiffer,  // K and V hold different row counts: fields K's, V's
  kTooManyRows,     // more rows than a slot holds
  kNoMemory,        // the slot arena refused the buffer (OutOfBudget)
  kSlotTooBig,      // larger than attend-maxmemory (OutOfBudget): fields bytes, the limit
  kNoSlots,         // attend-max-slots is 0 (OutOfBudget)
  // A query against a slot (attend::Validate): answered by the command's own
  // "... failed (...)" text, kept apart here for logs and tests.
  kSlotEmpty,         // the slot holds no K/V
  kMissingQ,          // no Q
  kQueryHeadsRange,   // H_q outside 1..max: fields max
  kQueryRowsRange,    // M outside 1..max: fields max
  kHeadDimMismatch,   // D unlike the slot's: fields D, the slot's
  kKvHeadsMismatch,   // H_kv unlike the slot's: fields H_kv, the slot's
  kWindowNegative,    // window < 0
  kHeadMapRange,      // a head_map entry >= H_kv: fields its index
  kGqaMismatch,       // H_q not a multiple of H_kv (no head_map)
  kNonFiniteQ,        // inf or NaN in Q
  kSuffixTooLong,     // S_suf beyond the limit
  kMissingSuffix,     // S_suf > 0 without K_suf/V_suf
  kRowsBeyondSuffix,  // M > S_suf
  kNonFiniteSuffix,   // inf or NaN in K_suf/V_suf
  kSparseExclusive,   // explicit indices and sparse auto together
  kSparseIncomplete,  // indices without counts or the reverse
  kSparseCountRange,  // a count outside 0..K_sparse_max: fields head
  kSparseIndexRange,  // an index outside 0..N-1: fields index, N
  kBlockSize,         // sparse auto block < 1
  kKTop,              // sparse auto K_top < 1
  kUnknownSelector,   // a selector id this build lacks
  kNotSparseAuto,     // SelectBlocks of a request that is not sparse auto
};

constexpr std::string_view ReasonDomain(Reason) { return "attend"; }

}  // namespace pion::attend
