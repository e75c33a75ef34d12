// EventLoop: one epoll instance with file-descriptor callbacks, timers and an
// eventfd wakeup for tasks posted from other threads. It knows nothing of RESP,
// connections or the store (Dragonfly's facade rule).
//
// Thread-safety: Post() and Stop() may be called from any thread; everything
// else only from the thread running Run() (or before it starts).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <vector>

#include "base/status.h"

struct epoll_event;

namespace pion::net {

class EventLoop {
 public:
  using IoCallback = std::function<void(uint32_t events)>;
  using Task = std::function<void()>;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  Status Init();

  // Registers `fd` for `events` (EPOLLIN, EPOLLOUT, EPOLLET, ...). The callback
  // may Remove() its own or any other fd.
  Status Add(int fd, uint32_t events, IoCallback cb);
  // Stops watching `fd` (does not close it). Pending events for it are dropped.
  void Remove(int fd);

  // Runs `t` once after `delay_ms`, or every `delay_ms` when `repeat`.
  uint64_t AddTimer(uint64_t delay_ms, bool repeat, Task t);
  // Forgets timer `id` (its task never runs again); an unknown id is ignored.
  void CancelTimer(uint64_t id);

  // Runs `t` on the loop thread soon (thread-safe, wakes the loop).
  void Post(Task t);
  // Runs `t` on this thread after the current batch of events.
  void Defer(Task t) { deferred_.push_back(std::move(t)); }

  // Runs `hook` at the end of every turn (after the I/O callbacks, deferred
  // tasks and timers of that turn). It returns how long, in microseconds, the
  // loop may sleep before its next turn (-1: no bound of its own): work the hook
  // holds back for a bounded time (KV events, batched up to a deadline) is then
  // finished on time even when no other event comes. One hook; set it before Run().
  void SetTurnHook(std::function<int64_t()> hook) { turn_hook_ = std::move(hook); }

  void Run();
  void Stop();  // thread-safe

 private:
  struct Handler {
    int fd;
    IoCallback cb;
    bool alive = true;
  };
  struct Timer {
    uint64_t when_ns;
    uint64_t id;
    bool operator>(const Timer& o) const { return when_ns > o.when_ns; }
  };
  struct TimerInfo {
    uint64_t period_ms;
    Task task;
  };

  void DrainPosted();
  int NextTimeoutMs() const;
  // epoll_wait, sleeping at most `hook_us` microseconds when that is >= 0.
  int Wait(::epoll_event* events, int max, int64_t hook_us);
  void RunTimers();
  void RunDeferred();

  int epfd_ = -1;
  int wakefd_ = -1;
  std::unordered_map<int, std::unique_ptr<Handler>> handlers_;
  std::vector<std::unique_ptr<Handler>> graveyard_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::unordered_map<uint64_t, TimerInfo> timer_info_;
  uint64_t next_timer_id_ = 1;
  std::vector<Task> deferred_;
  std::function<int64_t()> turn_hook_;
  bool no_pwait2_ = false;  // epoll_pwait2 failed once: Wait rounds to milliseconds

  std::mutex post_mu_;
  std::vector<Task> posted_;   // guarded by post_mu_
  bool wake_pending_ = false;  // guarded by post_mu_
  std::atomic<bool> stop_{false};
};

}  // namespace pion::net
