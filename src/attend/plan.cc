#include "attend/plan.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pion::attend::internal {
namespace {

inline constexpr uint32_t kMaxSuffix = 1u << 20;

bool AllFinite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

}  // namespace

Status Validate(const Slot& slot, const AttendRequest& req, Shape* sh) {
  if (slot.empty())
    return Status(Code::kInvalidArgument, Reason::kSlotEmpty, {}, "slot holds no K/V");
  if (req.q == nullptr) return Status(Code::kInvalidArgument, Reason::kMissingQ, {}, "missing Q");
  if (req.h_q < 1 || req.h_q > kMaxHeads) {
    return Status(Code::kInvalidArgument, Reason::kQueryHeadsRange, {kMaxHeads},
                  "H_q must be 1.." + std::to_string(kMaxHeads));
  }
  if (req.m < 1 || req.m > kMaxQueryRows) {
    return Status(Code::kInvalidArgument, Reason::kQueryRowsRange, {kMaxQueryRows},
                  "M must be 1.." + std::to_string(kMaxQueryRows));
  }
  if (req.d != slot.dim()) {
    return Status(
        Code::kInvalidArgument, Reason::kHeadDimMismatch, {req.d, slot.dim()},
        "D " + std::to_string(req.d) + " does not match the slot's " + std::to_string(slot.dim()));
  }
  const uint32_t h_kv = req.h_kv == 0 ? slot.heads() : req.h_kv;
  if (h_kv != slot.heads()) {
    return Status(Code::kInvalidArgument, Reason::kKvHeadsMismatch, {h_kv, slot.heads()},
                  "H_kv " + std::to_string(h_kv) + " does not match the slot's " +
                      std::to_string(slot.heads()));
  }
  if (req.window < 0)
    return Status(Code::kInvalidArgument, Reason::kWindowNegative, {}, "window must be >= 0");
  sh->h_q = req.h_q;
  sh->h_kv = h_kv;
  sh->m = req.m;
  sh->d = req.d;
  sh->n = slot.tokens();
  sh->s = req.s;
  sh->window = req.window;
  sh->kv.assign(req.h_q, 0);
  if (req.head_map != nullptr) {
    for (uint32_t i = 0; i < req.h_q; ++i) {
      if (req.head_map[i] < 0 || static_cast<uint32_t>(req.head_map[i]) >= h_kv) {
        return Status(Code::kInvalidArgument, Reason::kHeadMapRange, {i},
                      "head_map[" + std::to_string(i) + "] out of range");
      }
      sh->kv[i] = static_cast<uint32_t>(req.head_map[i]);
    }
  } else {
    if (req.h_q % h_kv != 0) {
      return Status(Code::kInvalidArgument, Reason::kGqaMismatch, {req.h_q, h_kv},
                    "H_q must be a multiple of H_kv without a head_map");
    }
    const uint32_t g = req.h_q / h_kv;
    for (uint32_t i = 0; i < req.h_q; ++i) sh->kv[i] = i / g;
  }
  const size_t qn = static_cast<size_t>(req.h_q) * req.m * req.d;
  if (!AllFinite(req.q, qn))
    return Status(Code::kInvalidArgument, Reason::kNonFiniteQ, {}, "non-finite value in Q");
  if (req.s > 0) {
    if (req.s > kMaxSuffix)
      return Status(Code::kInvalidArgument, Reason::kSuffixTooLong, {req.s}, "suffix too long");
    if (req.k_suf == nullptr || req.v_suf == nullptr) {
      return Status(Code::kInvalidArgument, Reason::kMissingSuffix, {}, "missing suffix K/V");
    }
    if (req.m > req.s)
      return Status(Code::kInvalidArgument, Reason::kRowsBeyondSuffix, {req.m, req.s}, "M > S_suf");
    const size_t sn = static_cast<size_t>(h_kv) * req.s * req.d;
    if (!AllFinite(req.k_suf, sn) || !AllFinite(req.v_suf, sn)) {
      return Status(Code::kInvalidArgument, Reason::kNonFiniteSuffix, {},
                    "non-finite value in the suffix K/V");
    }
  }
  const bool explicit_sparse = req.indices != nullptr || req.counts != nullptr;
  if (explicit_sparse && req.sparse_auto) {
    return Status(Code::kInvalidArgument, Reason::kSparseExclusive, {},
                  "explicit indices and sparse auto are exclusive");
  }
  if (explicit_sparse) {
    if (req.indices == nullptr || req.counts == nullptr) {
      return Status(Code::kInvalidArgument, Reason::kSparseIncomplete, {},
                    "sparse needs both indices and counts");
    }
    for (uint32_t h = 0; h < req.h_q; ++h) {
      const int32_t c = req.counts[h];
      if (c < 0 || static_cast<uint32_t>(c) > req.k_sparse_max) {
        return Status(Code::kInvalidArgument, Reason::kSparseCountRange, {h},
                      "count of head " + std::to_string(h) + " must be 0..K_sparse_max");
      }
      const int32_t* idx = req.indices + static_cast<size_t>(h) * req.k_sparse_max;
      for (int32_t i = 0; i < c; ++i) {
        if (idx[i] < 0 || static_cast<uint32_t>(idx[i]) >= sh->n) {
          return Status(Code::kInvalidArgument, Reason::kSparseIndexRange, {idx[i], sh->n},
                        "sparse index " + std::to_string(idx[i]) + " out of range [0, " +
                            std::to_string(sh->n) + ")");
        }
      }
    }
  }
  if (req.sparse_auto) {
    if (req.block < 1)
      return Status(Code::kInvalidArgument, Reason::kBlockSize, {}, "block size must be >= 1");
    if (req.k_top < 1)
      return Status(Code::kInvalidArgument, Reason::kKTop, {}, "K_top must be >= 1");
    if (req.selector != Selector::kBlockMean && req.selector != Selector::kQuest) {
      return Status(Code::kInvalidArgument, Reason::kUnknownSelector,
                    {static_cast<int>(req.selector)}, "unknown selector");
    }
  }
  return Status::OK();
}

Visible VisibleOf(const Shape& sh, uint32_t m) {
  Visible v{};
  const int64_t n = sh.n, s = sh.s, w = sh.window;
  if (s > 0) {
    const int64_t q = n + s - sh.m + m;  // position of row m
    const int64_t first = w > 0 ? q - w + 1 : 0;
    v.lo = std::max<int64_t>(0, first);
    v.hi = n;
    if (v.lo > v.hi) v.lo = v.hi;
    v.slo = std::max<int64_t>(0, first - n);
    v.shi = q - n + 1;
  } else {
    v.lo = w > 0 ? std::max<int64_t>(0, n - w) : 0;
    v.hi = n;
    v.slo = v.shi = 0;
  }
  return v;
}

bool SparseAutoDense(const Shape& sh, const AttendRequest& req, uint32_t* k_top) {
  const uint64_t n_blocks = (static_cast<uint64_t>(sh.n) + req.block - 1) / req.block;
  *k_top = static_cast<uint32_t>(std::min<uint64_t>(req.k_top, n_blocks));
  return static_cast<uint64_t>(req.k_top) * req.block >= sh.n;
}

}  // namespace pion::attend::internal
