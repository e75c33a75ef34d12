// TaskRunner: a small fixed pool of background threads owned by the Server for
// work a worker must not block on (KV.PREFIX.SAVE's snapshot write, COMMIT's
// fsync). Tasks run in FIFO order on whichever thread is free; a handler that
// posts one usually holds a DeferredReply (net/deferred_reply.h) and completes it
// from the task. Not a thread per request: the pool size is fixed at
// construction.
//
// Thread-safety: every method may be called from any thread. Stop() runs every
// task already queued (it finishes work, it does not cancel it), then joins;
// Post() afterwards returns false and drops the task.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pion::server {

class TaskRunner {
 public:
  using Task = std::function<void()>;

  // `name` prefixes the thread names ("<name>0", ...; at most 12 bytes).
  TaskRunner(int threads, std::string name);
  ~TaskRunner();  // Stop()
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  void Start();
  // Queues `t`; false (and `t` is dropped unrun) once Stop() began.
  bool Post(Task t);
  // Runs what is queued, then joins the threads. Idempotent.
  void Stop();

  // Tasks queued or running.
  size_t pending() const;

 private:
  void Loop();

  const int num_threads_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;  // guarded by mu_
  size_t running_ = 0;      // guarded by mu_
  bool stop_ = false;       // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace pion::server
