// See index_seed.h.
#include "store/index_seed.h"

#include <random>

namespace pion::store {

uint64_t IndexSeed() {
  static const uint64_t seed = [] {
    std::random_device rd;  // getrandom(2)
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

}  // namespace pion::store
