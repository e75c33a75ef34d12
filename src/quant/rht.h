// Randomized Hadamard transform (RHT) used by the turbo formats (docs/quant_formats.md §2.5).
// A row of D values is cut into blocks of R = min(128, largest power of two dividing D)
// coordinates; every block gets the same transform
//   forward  y = (1/sqrt(R)) * S2 .* H_R (S1 .* x)
//   inverse  x = (1/sqrt(R)) * S1 .* H_R (S2 .* y)
// with H_R the unnormalised Walsh-Hadamard matrix in Sylvester order and S1, S2 fixed
// +-1 vectors from splitmix64("TURBOKV1"). The butterflies run in stage order
// h = 1, 2, 4, ..., R/2 with (a, b) -> (a + b, a - b); the AVX2 kernel performs exactly
// the same float operations, so both give identical bits. Pure functions, thread-safe.
#pragma once

#include <cstdint>

namespace pion::quant::rht {

inline constexpr uint64_t kSeed = 0x545552424F4B5631ull;  // "TURBOKV1"
inline constexpr uint32_t kMaxBlock = 128;

constexpr uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct SignWords {
  uint64_t w[4];
};
constexpr SignWords MakeSignWords() {
  SignWords s{};
  uint64_t state = kSeed;
  for (auto& w : s.w) w = SplitMix64(state);
  return s;
}
inline constexpr SignWords kSignWords = MakeSignWords();
// The four words listed in docs/quant_formats.md §2.5; S1 = w0,w1 and S2 = w2,w3.
static_assert(kSignWords.w[0] == 0xBA352C674EF6AB7Bull);
static_assert(kSignWords.w[1] == 0xAD177EECD547E2EFull);
static_assert(kSignWords.w[2] == 0x4EA7E891AE15959Eull);
static_assert(kSignWords.w[3] == 0x616EF2E4C918E2F8ull);

// True when S1[i] (resp. S2[i]) is -1; i < 128.
constexpr bool S1Negative(uint32_t i) { return (kSignWords.w[i / 64] >> (i % 64)) & 1; }
constexpr bool S2Negative(uint32_t i) { return (kSignWords.w[2 + i / 64] >> (i % 64)) & 1; }

// R for a row of `dim` values (dim % 32 == 0).
constexpr uint32_t BlockSize(uint32_t dim) {
  uint32_t r = dim & (~dim + 1);  // lowest set bit = largest power of two dividing dim
  return r > kMaxBlock ? kMaxBlock : r;
}
// 1/sqrt(R) rounded to float (R = 32, 64, 128).
constexpr float InvSqrt(uint32_t r) {
  return r == 32 ? 0.17677669529663687f : r == 64 ? 0.125f : 0.08838834764831845f;
}

// In-place unnormalised Walsh-Hadamard transform of t[0..r), stages h = 1..r/2.
void FwhtRef(float* t, uint32_t r);
// One block of r values (r = 32, 64 or 128): forward / inverse RHT.
void ForwardRef(const float* x, uint32_t r, float* y);
void InverseRef(const float* y, uint32_t r, float* x);

}  // namespace pion::quant::rht
