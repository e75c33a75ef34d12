// The oracle: docs/attention.md §1 written out literally, one (query head, row) at a time,
// with every sum in double and a two-pass softmax. It shares only request validation
// and the position rule (plan.cc) with the fast path.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "attend/attend.h"
#include "attend/plan.h"

namespace pion::attend {

using internal::Shape;

namespace {

// Block scores in double from the stored K values (no cached statistics).
std::vector<double> RefBlockScores(const Slot& slot, const Shape& sh, const AttendRequest& req) {
  const uint32_t d = sh.d, B = req.block;
  const uint32_t nb = static_cast<uint32_t>((static_cast<uint64_t>(sh.n) + B - 1) / B);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> scores(nb, 0.0);
  std::vector<double> mean(d), lo(d), hi(d);
  for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
    const uint32_t g = sh.kv[hq];
    for (uint32_t b = 0; b < nb; ++b) {
      const uint32_t t0 = b * B;
      const uint32_t t1 = static_cast<uint32_t>(std::min<uint64_t>(sh.n, uint64_t{t0} + B));
      std::fill(mean.begin(), mean.end(), 0.0);
      std::fill(lo.begin(), lo.end(), std::numeric_limits<double>::infinity());
      std::fill(hi.begin(), hi.end(), -std::numeric_limits<double>::infinity());
      for (uint32_t t = t0; t < t1; ++t) {
        for (uint32_t x = 0; x < d; ++x) {
          const double k = slot.KAt(g, t, x);
          mean[x] += k;
          lo[x] = std::min(lo[x], k);
          hi[x] = std::max(hi[x], k);
        }
      }
      for (uint32_t x = 0; x < d; ++x) mean[x] /= (t1 - t0);
      for (uint32_t m = 0; m < sh.m; ++m) {
        const float* q = req.q + (static_cast<size_t>(hq) * sh.m + m) * d;
        double s = 0.0;
        for (uint32_t x = 0; x < d; ++x) {
          if (req.selector == Selector::kBlockMean) {
            s += q[x] * mean[x];
          } else {
            s += std::max(q[x] * lo[x], q[x] * hi[x]);
          }
        }
        scores[b] += s * scale;
      }
    }
  }
  return scores;
}

std::vector<uint32_t> RefTop(const std::vector<double>& scores, uint32_t k) {
  std::vector<uint32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](uint32_t x, uint32_t y) { return scores[x] > scores[y]; });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace

Status SelectBlocksReference(const Slot& slot, const AttendRequest& req,
                             std::vector<uint32_t>* blocks, std::vector<double>* scores) {
  Shape sh;
  PION_RETURN_IF_ERROR(internal::Validate(slot, req, &sh));
  if (!req.sparse_auto)
    return Status(Code::kInvalidArgument, Reason::kNotSparseAuto, {}, "not a sparse auto request");
  uint32_t k_top = 0;
  const bool dense = internal::SparseAutoDense(sh, req, &k_top);
  std::vector<double> sc = RefBlockScores(slot, sh, req);
  if (dense) {
    blocks->resize(sc.size());
    std::iota(blocks->begin(), blocks->end(), 0u);
  } else {
    *blocks = RefTop(sc, k_top);
  }
  if (scores) *scores = std::move(sc);
  return Status::OK();
}

Status AttendReference(const Slot& slot, const AttendRequest& req, float* out, float* lse) {
  Shape sh;
  PION_RETURN_IF_ERROR(internal::Validate(slot, req, &sh));
  const uint32_t d = sh.d, N = sh.n;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

  // Prefix mask shared by all heads (sparse auto), when not dense.
  std::vector<bool> auto_mask;
  if (req.sparse_auto) {
    std::vector<uint32_t> blocks;
    PION_RETURN_IF_ERROR(SelectBlocksReference(slot, req, &blocks, nullptr));
    auto_mask.assign(N, false);
    for (uint32_t b : blocks) {
      const uint64_t end = std::min<uint64_t>(N, (uint64_t{b} + 1) * req.block);
      for (uint64_t t = uint64_t{b} * req.block; t < end; ++t) {
        auto_mask[t] = true;
      }
    }
  }
  std::vector<double> s;
  std::vector<const float*> suf_k, suf_v;
  std::vector<int64_t> pos;
  for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
    const uint32_t g = sh.kv[hq];
    std::set<int32_t> chosen;
    if (req.indices != nullptr) {
      const int32_t* idx = req.indices + static_cast<size_t>(hq) * req.k_sparse_max;
      chosen.insert(idx, idx + req.counts[hq]);
    }
    for (uint32_t m = 0; m < sh.m; ++m) {
      const float* q = req.q + (static_cast<size_t>(hq) * sh.m + m) * d;
      float* o = out + (static_cast<size_t>(hq) * sh.m + m) * d;
      // Visible positions, written from docs/attention.md §1 directly: the row's own position and
      // window.
      const int64_t qpos = sh.s > 0 ? int64_t{N} + sh.s - sh.m + m : int64_t{N};
      pos.clear();
      for (int64_t p = 0; p < int64_t{N} + sh.s; ++p) {
        if (sh.s > 0) {
          if (p > qpos) continue;
          if (sh.window > 0 && p <= qpos - sh.window) continue;
        } else {
          if (sh.window > 0 && p < int64_t{N} - sh.window) continue;
        }
        if (p < N) {
          if (req.indices != nullptr && !chosen.count(static_cast<int32_t>(p))) continue;
          if (!auto_mask.empty() && !auto_mask[p]) continue;
        }
        pos.push_back(p);
      }
      if (pos.empty()) {
        std::fill(o, o + d, 0.0f);
        if (lse) lse[hq * sh.m + m] = -std::numeric_limits<float>::infinity();
        continue;
      }
      auto kat = [&](int64_t p, uint32_t x) -> double {
        if (p < N) return slot.KAt(g, static_cast<uint32_t>(p), x);
        return req.k_suf[(static_cast<size_t>(g) * sh.s + (p - N)) * d + x];
      };
      auto vat = [&](int64_t p, uint32_t x) -> double {
        if (p < N) return slot.VAt(g, static_cast<uint32_t>(p), x);
        return req.v_suf[(static_cast<size_t>(g) * sh.s + (p - N)) * d + x];
      };
      s.assign(pos.size(), 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < pos.size(); ++i) {
        double dot = 0.0;
        for (uint32_t x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * kat(pos[i], x);
        s[i] = scale * dot;
        mx = std::max(mx, s[i]);
      }
      double sum = 0.0;
      for (double& v : s) {
        v = std::exp(v - mx);
        sum += v;
      }
      for (uint32_t x = 0; x < d; ++x) {
        double acc = 0.0;
        for (size_t i = 0; i < pos.size(); ++i) acc += s[i] * vat(pos[i], x);
        o[x] = static_cast<float>(acc / sum);
      }
      if (lse) lse[hq * sh.m + m] = static_cast<float>(mx + std::log(sum));
    }
  }
  return Status::OK();
}

}  // namespace pion::attend
