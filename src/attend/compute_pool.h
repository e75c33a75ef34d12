// ComputePool: the server's attention threads (--attend-threads, docs/attention.md §5a), apart
// from the I/O workers and the background SAVE/COMMIT runner.
//
// Two kinds of work share its threads: whole tasks (a query or a KV.PREFIX.WARM whose
// reply is completed later, Post()) and the split-KV chunks of one attention call
// (ParallelFor(), the Executor interface). ParallelFor queues helpers ahead of waiting
// tasks and the calling thread claims chunks itself, so a task running on the pool
// may call ParallelFor without deadlock (it finishes its own chunks even when every
// other thread is busy), and any number of ParallelFor calls may run at once.
//
// The threads and the queue are the shared base::ThreadPool (base/thread_pool.h);
// this class adds the parallel loop on top of it.
//
// Thread-safety: every method may be called from any thread. Stop() runs the tasks
// already queued, then joins; Post() afterwards returns false and drops the task.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "attend/executor.h"
#include "base/thread_pool.h"

namespace pion::attend {

class ComputePool final : public Executor {
 public:
  using Task = std::function<void()>;

  // `threads` >= 1; `name` prefixes the thread names (at most 12 bytes kept).
  // The threads run at base::ThreadPriority::kBackground: the I/O workers
  // (which parse, answer small commands and run small queries inline) come
  // first when they share cores.
  ComputePool(uint32_t threads, std::string name);
  ~ComputePool() override = default;  // the pool stops: queued tasks run, then joins
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Queues `t` behind the tasks already waiting; false (dropped unrun) once stopped.
  bool Post(Task t) { return pool_.Post(std::move(t)); }
  // Runs what is queued, then joins. Idempotent.
  void Stop() { pool_.Stop(); }

  uint32_t concurrency() const override { return pool_.threads(); }
  void ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) override;

  // Tasks queued or running (helpers of ParallelFor included).
  size_t pending() const { return pool_.pending(); }

 private:
  base::ThreadPool pool_;
};

}  // namespace pion::attend
