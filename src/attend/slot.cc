#include "attend/slot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "attend/kernel.h"
#include "base/check.h"
#include "base/fp16.h"

namespace pion::attend {

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "f32";
    case Precision::kF16:
      return "f16";
    case Precision::kInt8:
      return "int8";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view name) {
  std::string low(name);
  for (char& c : low) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  if (low == "f32") return Precision::kF32;
  if (low == "f16") return Precision::kF16;
  if (low == "int8") return Precision::kInt8;
  return std::nullopt;
}

std::string_view SelectorName(Selector s) {
  return s == Selector::kBlockMean ? "block_mean" : "quest";
}

namespace {

constexpr size_t kAlign = 64;
size_t RoundUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Values at or above this magnitude round to +-inf in binary16.
constexpr float kF16Overflow = 65520.0f;

// The Tensor field of a row error ("K" or "V").
int TensorOf(const char* what) {
  return static_cast<int>(what[0] == 'V' ? Tensor::kV : Tensor::kK);
}

Status NonFinite(const char* what, uint32_t h, size_t n) {
  return Status(Code::kInvalidArgument, Reason::kNonFinite, {TensorOf(what), h, n},
                std::string("non-finite value in ") + what + " head " + std::to_string(h) +
                    " token " + std::to_string(n));
}
Status F16Range(const char* what, uint32_t h, size_t n) {
  return Status(Code::kInvalidArgument, Reason::kF16Range, {TensorOf(what), h, n},
                std::string("value beyond the f16 range in ") + what + " head " +
                    std::to_string(h) + " token " + std::to_string(n));
}

// int8 row: s = absmax/127, q = clamp(rint(x * 127/absmax)).
void QuantizeInt8(const float* x, uint32_t d, int8_t* q, float* scale) {
  float amax = 0.0f;
  for (uint32_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    std::memset(q, 0, d);
    *scale = 0.0f;
    return;
  }
  const float inv = 127.0f / amax;
  for (uint32_t i = 0; i < d; ++i) {
    float r = std::rint(x[i] * inv);
    r = std::min(127.0f, std::max(-127.0f, r));
    q[i] = static_cast<int8_t>(r);
  }
  *scale = amax / 127.0f;
}

const internal::KernelSet& K() { return internal::FastKernels(); }

// The error for an f32 row that failed the range check (limit +inf: finiteness only).
Status RowError(const float* x, uint32_t d, const char* what, uint32_t h, size_t n) {
  for (uint32_t i = 0; i < d; ++i) {
    if (!std::isfinite(x[i])) return NonFinite(what, h, n);
  }
  return F16Range(what, h, n);
}

// Writes one row of f32 values into the slot element at `dst` (and its scale).
Status PutRowF32(Precision p, const float* x, uint32_t d, uint8_t* dst, float* scale,
                 const char* what, uint32_t h, size_t n) {
  const float limit = p == Precision::kF16 ? kF16Overflow : std::numeric_limits<float>::infinity();
  if (!K().abs_below(x, d, limit)) return RowError(x, d, what, h, n);
  switch (p) {
    case Precision::kF32:
      std::memcpy(dst, x, static_cast<size_t>(d) * 4);
      return Status::OK();
    case Precision::kF16:
      return quant::EncodeRows(quant::Format::kFp16, x, 1, d, dst);
    case Precision::kInt8:
      QuantizeInt8(x, d, reinterpret_cast<int8_t*>(dst), scale);
      return Status::OK();
  }
  return Status::OK();
}

Status PutRowF16(Precision p, const uint16_t* x, uint32_t d, uint8_t* dst, float* scale, float* tmp,
                 const char* what, uint32_t h, size_t n) {
  if (!K().finite_f16(x, d)) return NonFinite(what, h, n);
  if (p == Precision::kF16) {
    std::memcpy(dst, x, static_cast<size_t>(d) * 2);
    return Status::OK();
  }
  quant::DecodeRows(quant::Format::kFp16, reinterpret_cast<const uint8_t*>(x), 1, d, tmp);
  return PutRowF32(p, tmp, d, dst, scale, what, h, n);
}

Status CheckShape(uint32_t h, uint32_t d) {
  if (h < 1 || h > kMaxHeads) {
    return Status(Code::kInvalidArgument, Reason::kHeadsRange, {kMaxHeads},
                  "H must be 1.." + std::to_string(kMaxHeads));
  }
  if (d < 1 || d > kMaxHeadDim) {
    return Status(Code::kInvalidArgument, Reason::kHeadDimRange, {kMaxHeadDim},
                  "D must be 1.." + std::to_string(kMaxHeadDim));
  }
  return Status::OK();
}

}  // namespace

Slot::Buffer::Buffer(SlotArena* arena, size_t bytes) : arena_(arena) {
  p_ = arena_ ? arena_->Allocate(bytes, &cap_) : SlotArena::AllocateFresh(bytes, &cap_);
}

Slot::Buffer::~Buffer() {
  if (p_ == nullptr) return;
  if (arena_) {
    arena_->Release(p_, cap_);
  } else {
    SlotArena::FreeBuffer(p_, cap_);
  }
}

void Slot::FreeBuf() {
  if (buf_ == nullptr) return;
  if (arena_) {
    arena_->Release(buf_, cap_bytes_);
  } else {
    SlotArena::FreeBuffer(buf_, cap_bytes_);
  }
  buf_ = nullptr;
}

Slot::~Slot() { FreeBuf(); }

Slot::Layout Slot::MakeLayout(Precision p, uint32_t h, uint32_t n, uint32_t d) {
  Layout l{};
  const size_t elems = static_cast<size_t>(h) * n * d;
  const size_t region = RoundUp(elems * ElementBytes(p));
  l.k_off = 0;
  l.v_off = region;
  l.ks_off = l.vs_off = 2 * region;
  l.total = 2 * region;
  if (p == Precision::kInt8) {
    const size_t sc = RoundUp(static_cast<size_t>(h) * n * sizeof(float));
    l.ks_off = 2 * region;
    l.vs_off = 2 * region + sc;
    l.total = 2 * region + 2 * sc;
  }
  if (l.total == 0) l.total = kAlign;  // N = 0: one aligned line, never null
  return l;
}

void Slot::ZeroPadding(uint8_t* buf, Precision p, uint32_t h, uint32_t n, uint32_t d,
                       const Layout& l) {
  const size_t used = static_cast<size_t>(h) * n * d * ElementBytes(p);
  std::memset(buf + l.k_off + used, 0, l.v_off - l.k_off - used);
  std::memset(buf + l.v_off + used, 0, l.ks_off - l.v_off - used);
  if (p == Precision::kInt8) {
    const size_t sc = static_cast<size_t>(h) * n * sizeof(float);
    std::memset(buf + l.ks_off + sc, 0, l.vs_off - l.ks_off - sc);
    std::memset(buf + l.vs_off + sc, 0, l.total - l.vs_off - sc);
  } else {
    std::memset(buf + l.ks_off, 0, l.total - l.ks_off);
  }
}

void Slot::Adopt(Buffer* buf, const Layout& l, Precision p, uint32_t h, uint32_t n, uint32_t d) {
  FreeBuf();
  cap_bytes_ = buf->capacity();
  buf_ = buf->release();
  alloc_bytes_ = l.total;
  k_off_ = l.k_off;
  v_off_ = l.v_off;
  ks_off_ = l.ks_off;
  vs_off_ = l.vs_off;
  prec_ = p;
  h_ = h;
  n_ = n;
  d_ = d;
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.clear();
}

const float* Slot::k_scale(uint32_t head) const {
  if (prec_ != Precision::kInt8) return nullptr;
  return reinterpret_cast<const float*>(buf_ + ks_off_) + static_cast<size_t>(head) * n_;
}
const float* Slot::v_scale(uint32_t head) const {
  if (prec_ != Precision::kInt8) return nullptr;
  return reinterpret_cast<const float*>(buf_ + vs_off_) + static_cast<size_t>(head) * n_;
}

size_t Slot::bytes() const {
  size_t b = cap_bytes_;
  std::lock_guard<std::mutex> lock(stats_mu_);
  for (const auto& s : stats_) b += s->bytes();
  return b;
}

namespace {
float ElementAt(Precision p, const uint8_t* base, const float* scales, size_t row, uint32_t d,
                uint32_t i) {
  const size_t idx = row * d + i;
  switch (p) {
    case Precision::kF32: {
      float f;
      std::memcpy(&f, base + idx * 4, 4);
      return f;
    }
    case Precision::kF16: {
      uint16_t x;
      std::memcpy(&x, base + idx * 2, 2);
      return F16ToF32(x);
    }
    case Precision::kInt8:
      return static_cast<float>(reinterpret_cast<const int8_t*>(base)[idx]) * scales[row];
  }
  return 0.0f;
}
}  // namespace

float Slot::KAt(uint32_t head, uint32_t n, uint32_t d) const {
  return ElementAt(prec_, static_cast<const uint8_t*>(k(head)), k_scale(head), n, d_, d);
}
float Slot::VAt(uint32_t head, uint32_t n, uint32_t d) const {
  return ElementAt(prec_, static_cast<const uint8_t*>(v(head)), v_scale(head), n, d_, d);
}

Status Slot::StoreF32(Precision p, uint32_t h, uint32_t n, uint32_t d, const float* k,
                      const float* v) {
  PION_RETURN_IF_ERROR(CheckShape(h, d));
  const Layout l = MakeLayout(p, h, n, d);
  Buffer buf(arena_.get(), l.total);
  if (!buf.get())
    return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "cannot allocate the slot");
  ZeroPadding(buf.get(), p, h, n, d, l);
  const uint32_t eb = ElementBytes(p);
  float* ks = reinterpret_cast<float*>(buf.get() + l.ks_off);
  float* vs = reinterpret_cast<float*>(buf.get() + l.vs_off);
  for (uint32_t hh = 0; hh < h; ++hh) {
    for (uint32_t t = 0; t < n; ++t) {
      const size_t row = static_cast<size_t>(hh) * n + t;
      PION_RETURN_IF_ERROR(
          PutRowF32(p, k + row * d, d, buf.get() + l.k_off + row * d * eb, ks + row, "K", hh, t));
      PION_RETURN_IF_ERROR(
          PutRowF32(p, v + row * d, d, buf.get() + l.v_off + row * d * eb, vs + row, "V", hh, t));
    }
  }
  Adopt(&buf, l, p, h, n, d);
  return Status::OK();
}

Status Slot::StoreF16(Precision p, uint32_t h, uint32_t n, uint32_t d, const uint16_t* k,
                      const uint16_t* v) {
  PION_RETURN_IF_ERROR(CheckShape(h, d));
  const Layout l = MakeLayout(p, h, n, d);
  Buffer buf(arena_.get(), l.total);
  if (!buf.get())
    return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "cannot allocate the slot");
  ZeroPadding(buf.get(), p, h, n, d, l);
  const uint32_t eb = ElementBytes(p);
  float* ks = reinterpret_cast<float*>(buf.get() + l.ks_off);
  float* vs = reinterpret_cast<float*>(buf.get() + l.vs_off);
  std::vector<float> tmp(d);
  for (uint32_t hh = 0; hh < h; ++hh) {
    for (uint32_t t = 0; t < n; ++t) {
      const size_t row = static_cast<size_t>(hh) * n + t;
      PION_RETURN_IF_ERROR(PutRowF16(p, k + row * d, d, buf.get() + l.k_off + row * d * eb,
                                     ks + row, tmp.data(), "K", hh, t));
      PION_RETURN_IF_ERROR(PutRowF16(p, v + row * d, d, buf.get() + l.v_off + row * d * eb,
                                     vs + row, tmp.data(), "V", hh, t));
    }
  }
  Adopt(&buf, l, p, h, n, d);
  return Status::OK();
}

namespace {

// Decodes the rows of `spans` in batches (into scratch that stays in L1/L2), checks a
// whole batch at once with the vector kernels, and writes each head's slice into the
// slot region (K or V) at [h][n][:]. Only a batch that fails the check is scanned row
// by row, for the error's head and token.
Status WriteRows(Precision p, uint32_t h, uint32_t d, uint32_t n, quant::Format f,
                 std::span<const RowSpan> spans, uint8_t* region, float* scales, const char* what) {
  constexpr size_t kBatch = 16;
  const uint32_t kv_dim = h * d;
  const size_t rb = quant::RowBytes(f, kv_dim);
  const uint32_t eb = ElementBytes(p);
  const size_t row_bytes = static_cast<size_t>(d) * eb;
  std::vector<float> f32(p == Precision::kF16 ? 0 : kBatch * kv_dim);
  std::vector<uint16_t> f16(p == Precision::kF16 ? kBatch * kv_dim : 0);
  size_t t = 0;
  for (const RowSpan& s : spans) {
    for (size_t r0 = 0; r0 < s.rows; r0 += kBatch) {
      const size_t nr = std::min(kBatch, s.rows - r0);
      const size_t vals = nr * kv_dim;
      if (p == Precision::kF16) {
        // fp16 rows are already the slot's bits: read them in place (when aligned).
        const uint16_t* batch = f16.data();
        const uint8_t* src = s.data + r0 * rb;
        if (f == quant::Format::kFp16 && reinterpret_cast<uintptr_t>(src) % 2 == 0) {
          batch = reinterpret_cast<const uint16_t*>(src);
        } else {
          quant::DecodeRowsF16(f, src, nr, kv_dim, f16.data());
        }
        if (!K().finite_f16(batch, vals)) {
          for (size_t r = 0; r < nr; ++r) {
            for (uint32_t hh = 0; hh < h; ++hh) {
              if (!K().finite_f16(batch + r * kv_dim + static_cast<size_t>(hh) * d, d))
                return NonFinite(what, hh, t + r);
            }
          }
        }
        for (size_t r = 0; r < nr; ++r, ++t) {
          const uint16_t* x = batch + r * kv_dim;
          uint8_t* dst = region + t * row_bytes;
          for (uint32_t hh = 0; hh < h; ++hh) {
            std::memcpy(dst, x, row_bytes);
            x += d;
            dst += static_cast<size_t>(n) * row_bytes;
          }
        }
        continue;
      }
      quant::DecodeRows(f, s.data + r0 * rb, nr, kv_dim, f32.data());
      const bool checked = K().abs_below(f32.data(), vals, std::numeric_limits<float>::infinity());
      for (size_t r = 0; r < nr; ++r, ++t) {
        for (uint32_t hh = 0; hh < h; ++hh) {
          const size_t row = static_cast<size_t>(hh) * n + t;
          const float* x = f32.data() + r * kv_dim + static_cast<size_t>(hh) * d;
          uint8_t* dst = region + row * row_bytes;
          if (checked && p == Precision::kF32) {
            std::memcpy(dst, x, row_bytes);
          } else {
            PION_RETURN_IF_ERROR(PutRowF32(p, x, d, dst, scales + row, what, hh, t));
          }
        }
      }
    }
  }
  return Status::OK();
}

size_t CountRows(std::span<const RowSpan> spans) {
  size_t n = 0;
  for (const RowSpan& s : spans) n += s.rows;
  return n;
}

}  // namespace

Status Slot::StoreRows(Precision p, uint32_t h, uint32_t d, quant::Format f,
                       std::span<const RowSpan> k_rows, std::span<const RowSpan> v_rows) {
  PION_RETURN_IF_ERROR(CheckShape(h, d));
  const uint64_t kv_dim = static_cast<uint64_t>(h) * d;
  if (kv_dim > quant::kMaxDim || !quant::DimSupported(f, static_cast<uint32_t>(kv_dim))) {
    return Status(Code::kInvalidArgument, Reason::kRowSize, {kv_dim, static_cast<int>(f)},
                  "H*D " + std::to_string(kv_dim) + " is not a valid " +
                      std::string(quant::FormatName(f)) + " row size");
  }
  const size_t nk = CountRows(k_rows), nv = CountRows(v_rows);
  if (nk != nv) {
    return Status(Code::kInvalidArgument, Reason::kRowCountDiffer, {nk, nv},
                  "K has " + std::to_string(nk) + " rows, V has " + std::to_string(nv));
  }
  if (nk > std::numeric_limits<uint32_t>::max()) {
    return Status(Code::kInvalidArgument, Reason::kTooManyRows, {nk}, "too many rows");
  }
  const uint32_t n = static_cast<uint32_t>(nk);
  const Layout l = MakeLayout(p, h, n, d);
  Buffer buf(arena_.get(), l.total);
  if (!buf.get())
    return Status(Code::kOutOfBudget, Reason::kNoMemory, {}, "cannot allocate the slot");
  ZeroPadding(buf.get(), p, h, n, d, l);
  float* ks = reinterpret_cast<float*>(buf.get() + l.ks_off);
  float* vs = reinterpret_cast<float*>(buf.get() + l.vs_off);
  PION_RETURN_IF_ERROR(WriteRows(p, h, d, n, f, k_rows, buf.get() + l.k_off, ks, "K"));
  PION_RETURN_IF_ERROR(WriteRows(p, h, d, n, f, v_rows, buf.get() + l.v_off, vs, "V"));
  Adopt(&buf, l, p, h, n, d);
  return Status::OK();
}

std::shared_ptr<const BlockStats> Slot::BlockStatsFor(uint32_t block, Selector sel) const {
  PION_CHECK(block > 0);
  std::lock_guard<std::mutex> lock(stats_mu_);
  for (const auto& s : stats_) {
    if (s->block == block && s->selector == sel) return s;
  }
  auto st = std::make_shared<BlockStats>();
  st->block = block;
  st->selector = sel;
  st->n_blocks = static_cast<uint32_t>((static_cast<uint64_t>(n_) + block - 1) / block);
  const size_t per_head = static_cast<size_t>(st->n_blocks) * d_;
  st->a.assign(per_head * h_, 0.0f);
  if (sel == Selector::kQuest) st->b.assign(per_head * h_, 0.0f);
  std::vector<double> sum(d_);
  std::vector<float> lo(d_), hi(d_), row(d_);
  for (uint32_t hh = 0; hh < h_; ++hh) {
    const uint8_t* kb = static_cast<const uint8_t*>(k(hh));
    const float* ks = k_scale(hh);
    for (uint32_t b = 0; b < st->n_blocks; ++b) {
      const uint32_t t0 = b * block;
      const uint32_t t1 = static_cast<uint32_t>(std::min<uint64_t>(n_, uint64_t{t0} + block));
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(lo.begin(), lo.end(), std::numeric_limits<float>::infinity());
      std::fill(hi.begin(), hi.end(), -std::numeric_limits<float>::infinity());
      for (uint32_t t = t0; t < t1; ++t) {
        // One stored row to f32 (the values the kernels attend to).
        const size_t r = static_cast<size_t>(t) * d_;
        if (prec_ == Precision::kF32) {
          std::memcpy(row.data(), kb + r * 4, static_cast<size_t>(d_) * 4);
        } else if (prec_ == Precision::kF16) {
          quant::DecodeRows(quant::Format::kFp16, kb + r * 2, 1, d_, row.data());
        } else {
          const int8_t* q = reinterpret_cast<const int8_t*>(kb) + r;
          for (uint32_t i = 0; i < d_; ++i) row[i] = static_cast<float>(q[i]) * ks[t];
        }
        for (uint32_t i = 0; i < d_; ++i) {
          sum[i] += row[i];
          lo[i] = std::min(lo[i], row[i]);
          hi[i] = std::max(hi[i], row[i]);
        }
      }
      float* a = st->a.data() + (static_cast<size_t>(hh) * st->n_blocks + b) * d_;
      if (sel == Selector::kBlockMean) {
        for (uint32_t i = 0; i < d_; ++i) a[i] = static_cast<float>(sum[i] / (t1 - t0));
      } else {
        float* bb = st->b.data() + (static_cast<size_t>(hh) * st->n_blocks + b) * d_;
        std::copy(lo.begin(), lo.end(), a);
        std::copy(hi.begin(), hi.end(), bb);
      }
    }
  }
  ++stats_builds_;
  // A few (block, selector) pairs at most are live at once; forget the oldest.
  if (stats_.size() >= kMaxCachedStats) stats_.erase(stats_.begin());
  stats_.push_back(st);
  return st;
}

uint64_t Slot::block_stats_builds() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_builds_;
}

}  // namespace pion::attend
