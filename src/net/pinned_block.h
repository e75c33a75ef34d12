// PinnedBlock: a block of memory a reply sent by reference keeps alive (a
// stored chunk, a private buffer of decoded rows), named by its address so that
// replies pinning the same block count it once against the client's limits.
#pragma once

#include <cstddef>

namespace pion::net {

struct PinnedBlock {
  const void* id;
  size_t bytes;
};

}  // namespace pion::net
