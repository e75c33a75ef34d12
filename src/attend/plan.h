// Internal to src/attend: request validation and the position rules of docs/attention.md §1
// shared by the fast path (attend.cc) and the reference (reference.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "attend/attend.h"

namespace pion::attend::internal {

struct Shape {
  uint32_t h_q, h_kv, m, d, n, s;
  int64_t window;
  std::vector<uint32_t> kv;  // kv head of each query head
};

// Checks every argument of `req` against `slot` (nothing is computed on error).
Status Validate(const Slot& slot, const AttendRequest& req, Shape* shape);

// Visible prefix positions [lo, hi) and suffix positions [slo, shi) (0-based within
// the suffix) of query row m (docs/attention.md §1).
struct Visible {
  int64_t lo, hi, slo, shi;
};
Visible VisibleOf(const Shape& sh, uint32_t m);

// Whether sparse auto goes dense (k_top * block >= N), and the clamped k_top.
bool SparseAutoDense(const Shape& sh, const AttendRequest& req, uint32_t* k_top);

}  // namespace pion::attend::internal
