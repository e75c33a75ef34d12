// Executor: where the split-KV chunks of one attention call run. The library never
// starts threads on its own; the server passes its compute pool, tests and benches a
// ThreadPoolExecutor, and a null executor means "inline, one chunk".
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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

// A fixed set of worker threads plus the caller. One ParallelFor at a time.
class ThreadPoolExecutor final : public Executor {
 public:
  explicit ThreadPoolExecutor(uint32_t threads);  // threads >= 1 (counting the caller)
  ~ThreadPoolExecutor() override;
  uint32_t concurrency() const override { return threads_; }
  void ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) override;

 private:
  void WorkerLoop();
  void RunTasks();

  const uint32_t threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(uint32_t)>* fn_ = nullptr;
  uint32_t n_ = 0;
  uint32_t next_ = 0;      // next task index (guarded by mu_)
  uint32_t finished_ = 0;  // tasks finished in this generation
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace pion::attend
