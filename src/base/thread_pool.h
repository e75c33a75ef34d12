// ThreadPool: a fixed set of named threads running queued tasks, the one
// mechanism under the server's background runner (server/task_runner.h: SAVE's
// snapshot write, COMMIT's fsync) and the attention compute pool
// (attend/compute_pool.h: queries, WARMs and split-KV chunks).
//
// Tasks run in queue order on whichever thread is free. Post() queues at the
// back; PostFront() ahead of every waiting task (work that finishes something
// already started, such as the helpers of a parallel loop). Stop() does not
// cancel: the threads run every task already queued, then exit and are joined.
// A task's captures are released outside the pool's lock (a task may hold a
// reply that completes when it is destroyed).
//
// Thread-safety: every method may be called from any thread, a task included
// (except Stop() from a task of the same pool, which would join itself).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pion::base {

// How a pool's threads are scheduled against the rest of the process.
enum class ThreadPriority {
  kNormal,
  // Work that must give way to the I/O workers when they share cores (the
  // attention compute pool): SCHED_BATCH (it never preempts a waking thread)
  // and kBackgroundNice nice levels below the thread that started the pool
  // (at most 19), so on a busy machine a worker's PING is not queued behind
  // long kernels. Best effort: a refusal leaves the thread as it was.
  kBackground,
};
inline constexpr int kBackgroundNice = 10;

class ThreadPool {
 public:
  using Task = std::function<void()>;

  // `threads` >= 1 (0 counts as 1). `name` prefixes the thread names
  // ("<name><i>", at most 12 bytes of it kept). No thread runs before Start().
  ThreadPool(uint32_t threads, std::string name, ThreadPriority priority = ThreadPriority::kNormal);
  ~ThreadPool();  // Stop()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Starts the threads. Idempotent; does nothing once Stop() began.
  void Start();
  // Queues `t` behind the waiting tasks; false (`t` dropped unrun) before
  // Start() or once Stop() began.
  bool Post(Task t);
  // Queues `t` ahead of the waiting tasks. Accepted while stopping, as long as
  // the threads are still draining the queue (false before Start() or after
  // they were joined).
  bool PostFront(Task t);
  // Runs what is queued, then joins the threads. Idempotent.
  void Stop();

  uint32_t threads() const { return num_threads_; }
  // Tasks queued or running.
  size_t pending() const;

 private:
  void Loop();

  const uint32_t num_threads_;
  const std::string name_;
  const ThreadPriority priority_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;            // guarded by mu_
  size_t running_ = 0;                // guarded by mu_
  bool started_ = false;              // guarded by mu_
  bool stop_ = false;                 // guarded by mu_
  bool joined_ = false;               // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_ (moved out by Stop)
};

}  // namespace pion::base
