// The fast path: plan work units (one per KV head, or per query head for explicit
// indices), cut each unit's positions into split-KV chunks, run the chunks (on the
// executor when there is one), merge them with the log-sum-exp rule, add the suffix
// and normalise.
#include "attend/attend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attend/kernel.h"
#include "attend/plan.h"
#include "base/check.h"

namespace pion::attend {

using internal::KernelSet;
using internal::RowJob;
using internal::Shape;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Seg {
  uint32_t a, b;  // prefix positions [a, b)
};

struct Unit {
  uint32_t g;                  // kv head
  std::vector<uint32_t> rows;  // query rows, as hq * M + m
  const std::vector<Seg>* segs;
  uint64_t positions;  // total positions of segs
};

std::vector<Seg> SegmentsOf(std::vector<uint32_t> idx) {
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<Seg> segs;
  for (uint32_t p : idx) {
    if (!segs.empty() && segs.back().b == p) {
      ++segs.back().b;
    } else {
      segs.push_back({p, p + 1});
    }
  }
  return segs;
}

const KernelSet& Kernels(const AttendOptions& opt, uint32_t d) {
  const KernelSet& fast = internal::FastKernels();
  if (opt.force_scalar || d % fast.dim_multiple != 0) return internal::ScalarKernels();
  return fast;
}

// Block scores (fast): summed over every query head and row.
void BlockScores(const Slot& slot, const Shape& sh, const AttendRequest& req,
                 const std::vector<float>& qs, const KernelSet& ks, const BlockStats& st,
                 std::vector<float>* scores) {
  const uint32_t d = sh.d, nb = st.n_blocks;
  scores->assign(nb, 0.0f);
  (void)slot;
  if (req.selector == Selector::kBlockMean) {
    // Linear in Q: sum the rows of each KV group first.
    std::vector<float> qsum(d);
    for (uint32_t g = 0; g < sh.h_kv; ++g) {
      std::fill(qsum.begin(), qsum.end(), 0.0f);
      bool any = false;
      for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
        if (sh.kv[hq] != g) continue;
        any = true;
        for (uint32_t m = 0; m < sh.m; ++m) {
          const float* q = qs.data() + (static_cast<size_t>(hq) * sh.m + m) * d;
          for (uint32_t x = 0; x < d; ++x) qsum[x] += q[x];
        }
      }
      if (!any) continue;
      const float* mean = st.a.data() + static_cast<size_t>(g) * nb * d;
      for (uint32_t b = 0; b < nb; ++b) (*scores)[b] += ks.dot(qsum.data(), mean + b * d, d);
    }
  } else {
    for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
      const size_t off = static_cast<size_t>(sh.kv[hq]) * nb * d;
      for (uint32_t m = 0; m < sh.m; ++m) {
        const float* q = qs.data() + (static_cast<size_t>(hq) * sh.m + m) * d;
        for (uint32_t b = 0; b < nb; ++b) {
          (*scores)[b] += ks.quest(q, st.a.data() + off + b * d, st.b.data() + off + b * d, d);
        }
      }
    }
  }
}

// The k best blocks (ties: lower index), ascending.
std::vector<uint32_t> TopBlocks(const std::vector<float>& scores, uint32_t k) {
  std::vector<uint32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0u);
  auto better = [&](uint32_t x, uint32_t y) {
    return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<float> ScaledQ(const AttendRequest& req) {
  const size_t n = static_cast<size_t>(req.h_q) * req.m * req.d;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(req.d)));
  std::vector<float> qs(n);
  for (size_t i = 0; i < n; ++i) qs[i] = req.q[i] * scale;
  return qs;
}

// Fast selection on a validated request. Empty `blocks` + true = dense.
bool SelectFast(const Slot& slot, const Shape& sh, const AttendRequest& req,
                const std::vector<float>& qs, const KernelSet& ks, std::vector<uint32_t>* blocks) {
  uint32_t k_top = 0;
  if (internal::SparseAutoDense(sh, req, &k_top)) return true;
  std::shared_ptr<const BlockStats> st = slot.BlockStatsFor(req.block, req.selector);
  std::vector<float> scores;
  BlockScores(slot, sh, req, qs, ks, *st, &scores);
  *blocks = TopBlocks(scores, k_top);
  return false;
}

}  // namespace

std::string_view AttendKernelName() { return internal::FastKernels().name; }

uint64_t StreamRead(const void* p, size_t bytes) {
  return internal::FastKernels().stream(p, bytes);
}

Status SelectBlocks(const Slot& slot, const AttendRequest& req, std::vector<uint32_t>* blocks,
                    const AttendOptions& opt) {
  Shape sh;
  PION_RETURN_IF_ERROR(internal::Validate(slot, req, &sh));
  if (!req.sparse_auto)
    return Status(Code::kInvalidArgument, Reason::kNotSparseAuto, {}, "not a sparse auto request");
  blocks->clear();
  const std::vector<float> qs = ScaledQ(req);
  if (SelectFast(slot, sh, req, qs, Kernels(opt, sh.d), blocks)) {
    const uint32_t nb = static_cast<uint32_t>((uint64_t{sh.n} + req.block - 1) / req.block);
    blocks->resize(nb);
    std::iota(blocks->begin(), blocks->end(), 0u);
  }
  return Status::OK();
}

Status Attend(const Slot& slot, const AttendRequest& req, float* out, float* lse,
              const AttendOptions& opt) {
  Shape sh;
  PION_RETURN_IF_ERROR(internal::Validate(slot, req, &sh));
  const uint32_t d = sh.d, M = sh.m;
  const KernelSet& ks = Kernels(opt, d);
  const std::vector<float> qs = ScaledQ(req);

  // Prefix segments: dense, sparse-auto mask (shared), or per-query-head indices.
  std::vector<std::vector<Seg>> seg_lists;
  std::vector<Unit> units;
  if (req.indices != nullptr) {
    seg_lists.resize(sh.h_q);
    for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
      const int32_t* idx = req.indices + static_cast<size_t>(hq) * req.k_sparse_max;
      seg_lists[hq] = SegmentsOf(std::vector<uint32_t>(idx, idx + req.counts[hq]));
    }
    for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
      Unit u{sh.kv[hq], {}, &seg_lists[hq], 0};
      for (uint32_t m = 0; m < M; ++m) u.rows.push_back(hq * M + m);
      units.push_back(std::move(u));
    }
  } else {
    seg_lists.resize(1);
    std::vector<uint32_t> blocks;
    if (req.sparse_auto && !SelectFast(slot, sh, req, qs, ks, &blocks)) {
      for (uint32_t b : blocks) {
        const uint32_t a = b * req.block;  // < N: b < ceil(N / B)
        const uint32_t e = static_cast<uint32_t>(std::min<uint64_t>(sh.n, uint64_t{a} + req.block));
        if (!seg_lists[0].empty() && seg_lists[0].back().b == a) {
          seg_lists[0].back().b = e;
        } else {
          seg_lists[0].push_back({a, e});
        }
      }
    } else if (sh.n > 0) {
      seg_lists[0].push_back({0, sh.n});
    }
    for (uint32_t g = 0; g < sh.h_kv; ++g) {
      Unit u{g, {}, &seg_lists[0], 0};
      for (uint32_t hq = 0; hq < sh.h_q; ++hq) {
        if (sh.kv[hq] != g) continue;
        for (uint32_t m = 0; m < M; ++m) u.rows.push_back(hq * M + m);
      }
      if (!u.rows.empty()) units.push_back(std::move(u));
    }
  }
  std::vector<internal::Visible> vis(M);
  for (uint32_t m = 0; m < M; ++m) vis[m] = internal::VisibleOf(sh, m);
  // Clip the segments to the prefix positions some row sees (a window), so split-KV
  // chunks are cut from work that exists.
  int64_t ulo = sh.n, uhi = 0;
  for (const internal::Visible& v : vis) {
    if (v.lo >= v.hi) continue;
    ulo = std::min(ulo, v.lo);
    uhi = std::max(uhi, v.hi);
  }
  for (std::vector<Seg>& list : seg_lists) {
    std::vector<Seg> clipped;
    for (const Seg& s : list) {
      const int64_t a = std::max<int64_t>(s.a, ulo), b = std::min<int64_t>(s.b, uhi);
      if (a < b) clipped.push_back({static_cast<uint32_t>(a), static_cast<uint32_t>(b)});
    }
    list = std::move(clipped);
  }
  for (Unit& u : units) {
    for (const Seg& s : *u.segs) u.positions += s.b - s.a;
  }

  // Split-KV: chunks per unit.
  uint32_t splits = 1;
  const uint32_t conc = opt.executor ? opt.executor->concurrency() : 1;
  uint64_t max_pos = 0;
  for (const Unit& u : units) max_pos = std::max(max_pos, u.positions);
  if (opt.splits > 0) {
    splits = opt.splits;
  } else if (conc > 1 && !units.empty()) {
    const uint32_t want = static_cast<uint32_t>((2 * conc + units.size() - 1) / units.size());
    const uint64_t cap =
        std::max<uint64_t>(1, max_pos / std::max<uint32_t>(1, opt.min_split_tokens));
    splits = static_cast<uint32_t>(std::min<uint64_t>(want, cap));
  }
  splits = std::max<uint32_t>(1, std::min<uint64_t>(splits, std::max<uint64_t>(1, max_pos)));

  // Partial states: [unit][chunk][row] -> (m, l, acc[d]).
  std::vector<size_t> row_base(units.size() + 1, 0);
  for (size_t i = 0; i < units.size(); ++i) row_base[i + 1] = row_base[i] + units[i].rows.size();
  const size_t total_rows = row_base.back();
  std::vector<float> pm(total_rows * splits, kNegInf), pl(total_rows * splits, 0.0f);
  std::vector<float> pacc(total_rows * splits * d, 0.0f);
  const size_t n_tasks = units.size() * splits;
  const uint32_t eb = ElementBytes(slot.precision());
  const internal::RunFn run = ks.run[static_cast<int>(slot.precision())];

  auto task = [&](uint32_t t) {
    const size_t ui = t / splits, c = t % splits;
    const Unit& u = units[ui];
    const uint64_t c0 = u.positions * c / splits, c1 = u.positions * (c + 1) / splits;
    if (c0 >= c1) return;
    const size_t nr = u.rows.size();
    const size_t base = (row_base[ui] * splits) + c * nr;
    std::vector<RowJob> jobs(nr);
    // The running state lives in this task's own memory while the kernel updates it every
    // tile, and is copied out once at the end: the shared pm/pl arrays pack the states
    // of all tasks into a few cache lines, and two threads updating neighbouring entries
    // every tile would bounce those lines between the cores (false sharing).
    std::vector<float> state(nr * (2 + static_cast<size_t>(d)), 0.0f);
    float* tm = state.data();
    float* tl = tm + nr;
    float* tacc = tl + nr;
    std::fill(tm, tm + nr, kNegInf);
    const uint8_t* k = static_cast<const uint8_t*>(slot.k(u.g));
    const uint8_t* v = static_cast<const uint8_t*>(slot.v(u.g));
    const float* kscale = slot.k_scale(u.g);
    const float* vscale = slot.v_scale(u.g);
    uint64_t off = 0;
    const std::vector<Seg>& segs = *u.segs;
    for (size_t si = 0; si < segs.size(); ++si) {
      const Seg& s = segs[si];
      const uint64_t len = s.b - s.a;
      const uint64_t lo = std::max(off, c0), hi = std::min(off + len, c1);
      if (lo < hi) {
        const uint32_t a = static_cast<uint32_t>(s.a + (lo - off));
        const uint32_t n = static_cast<uint32_t>(hi - lo);
        for (size_t r = 0; r < nr; ++r) {
          const uint32_t row = u.rows[r];
          const internal::Visible& vr = vis[row % M];
          jobs[r] = RowJob{qs.data() + static_cast<size_t>(row) * d,
                           vr.lo - a,
                           vr.hi - a,
                           &tm[r],
                           &tl[r],
                           &tacc[r * d]};
        }
        // The next segment of this chunk, so the kernel prefetches across the gap.
        internal::RunNext next{};
        const bool has_next = hi == off + len && hi < c1 && si + 1 < segs.size();
        if (has_next) {
          const Seg& nseg = segs[si + 1];
          const uint32_t tn = static_cast<uint32_t>(std::min<uint64_t>(nseg.b - nseg.a, c1 - hi));
          next = {k + static_cast<size_t>(nseg.a) * d * eb,
                  v + static_cast<size_t>(nseg.a) * d * eb, tn};
        }
        run(k + static_cast<size_t>(a) * d * eb, v + static_cast<size_t>(a) * d * eb,
            kscale ? kscale + a : nullptr, vscale ? vscale + a : nullptr, n, d, jobs.data(),
            static_cast<uint32_t>(nr), has_next ? &next : nullptr);
      }
      off += len;
      if (off >= c1) break;
    }
    std::copy(tm, tm + nr, pm.begin() + static_cast<ptrdiff_t>(base));
    std::copy(tl, tl + nr, pl.begin() + static_cast<ptrdiff_t>(base));
    std::copy(tacc, tacc + nr * d, pacc.begin() + static_cast<ptrdiff_t>(base * d));
  };
  if (opt.executor != nullptr && n_tasks > 1) {
    opt.executor->ParallelFor(static_cast<uint32_t>(n_tasks), task);
  } else {
    for (uint32_t t = 0; t < n_tasks; ++t) task(t);
  }

  // Merge the chunks (log-sum-exp rule) into chunk 0, add the suffix, normalise.
  const internal::RunFn run_f32 = ks.run[static_cast<int>(Precision::kF32)];
  for (size_t ui = 0; ui < units.size(); ++ui) {
    const Unit& u = units[ui];
    const size_t nr = u.rows.size();
    const size_t base = row_base[ui] * splits;
    for (size_t r = 0; r < nr; ++r) {
      float& m0 = pm[base + r];
      float& l0 = pl[base + r];
      float* a0 = &pacc[(base + r) * d];
      for (uint32_t c = 1; c < splits; ++c) {
        const size_t j = base + c * nr + r;
        const float mc = pm[j];
        if (mc == kNegInf) continue;
        const float mx = std::max(m0, mc);
        const float f0 = m0 == kNegInf ? 0.0f : std::exp(m0 - mx);
        const float fc = std::exp(mc - mx);
        const float* ac = &pacc[j * d];
        for (uint32_t x = 0; x < d; ++x) a0[x] = a0[x] * f0 + ac[x] * fc;
        l0 = l0 * f0 + pl[j] * fc;
        m0 = mx;
      }
    }
    if (sh.s > 0) {
      std::vector<RowJob> jobs(nr);
      for (size_t r = 0; r < nr; ++r) {
        const uint32_t row = u.rows[r];
        const internal::Visible& vr = vis[row % M];
        jobs[r] = RowJob{qs.data() + static_cast<size_t>(row) * d,
                         vr.slo,
                         vr.shi,
                         &pm[base + r],
                         &pl[base + r],
                         &pacc[(base + r) * d]};
      }
      const size_t off = static_cast<size_t>(u.g) * sh.s * d;
      run_f32(req.k_suf + off, req.v_suf + off, nullptr, nullptr, sh.s, d, jobs.data(),
              static_cast<uint32_t>(nr), nullptr);
    }
    for (size_t r = 0; r < nr; ++r) {
      const uint32_t row = u.rows[r];
      float* o = out + static_cast<size_t>(row) * d;
      const float l0 = pl[base + r];
      const float* a0 = &pacc[(base + r) * d];
      if (l0 > 0.0f) {
        const float inv = 1.0f / l0;
        for (uint32_t x = 0; x < d; ++x) o[x] = a0[x] * inv;
        if (lse) lse[row] = pm[base + r] + std::log(l0);
      } else {
        std::fill(o, o + d, 0.0f);
        if (lse) lse[row] = kNegInf;
      }
    }
  }
  // Rows of query heads that no unit covers cannot exist (every hq maps to a kv head).
  return Status::OK();
}

}  // namespace pion::attend
