// The per-process secret of the store's open-addressing indexes (the block
// tables' membership index, the shards' string index) and the mixing that
// places a hash with it: the hashes they index come from clients (block
// hashes) or from a public function of client-chosen keys (XXH3), so a slot
// taken from the hash's own bits would let crafted inputs pile into one run.
#pragma once

#include <cstdint>

namespace pion::store {

// From the kernel's random source, once per process, on first use.
uint64_t IndexSeed();

// MurmurHash3's fmix64 (a bijection with full avalanche) of h XOR the secret:
// its top bits choose a slot.
inline uint64_t SecretMix(uint64_t h, uint64_t seed) {
  uint64_t x = h ^ seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

}  // namespace pion::store
