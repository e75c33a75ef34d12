// Executor: where the split-KV chunks of one attention call run. The library never
// starts threads on its own; the server, the tests and the benches pass a ComputePool
// (attend/compute_pool.h), and a null executor means "inline, one chunk".
#pragma once

#include <cstdint>
#include <functional>

namespace pion::attend {

class Executor {
 public:
  virtual ~Executor() = default;
  // How many tasks can run at once (the split count aims at this).
  virtual uint32_t concurrency() const = 0;
  // Runs fn(0) .. fn(n-1), possibly in parallel, and returns when all are done. The
  // calling thread may run some of them.
  virtual void ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) = 0;
};

}  // namespace pion::attend
