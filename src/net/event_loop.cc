#include "net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "base/clock.h"
#include "base/log.h"

namespace pion::net {

EventLoop::EventLoop() = default;

EventLoop::~EventLoop() {
  if (wakefd_ >= 0) ::close(wakefd_);
  if (epfd_ >= 0) ::close(epfd_);
}

Status EventLoop::Init() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return Status::IOError(std::string("epoll_create1: ") + std::strerror(errno));
  wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakefd_ < 0) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
  return Add(wakefd_, EPOLLIN, [this](uint32_t) {
    uint64_t v;
    while (::read(wakefd_, &v, sizeof(v)) > 0) {
    }
    DrainPosted();
  });
}

Status EventLoop::Add(int fd, uint32_t events, IoCallback cb) {
  auto h = std::make_unique<Handler>(Handler{fd, std::move(cb)});
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = h.get();
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    return Status::IOError(std::string("epoll_ctl add: ") + std::strerror(errno));
  handlers_[fd] = std::move(h);
  return Status::OK();
}

void EventLoop::Remove(int fd) {
  auto it = handlers_.find(fd);
  if (it == handlers_.end()) return;
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  it->second->alive = false;
  // Events already returned by epoll_wait may still point at it: free it after
  // the batch.
  graveyard_.push_back(std::move(it->second));
  handlers_.erase(it);
}

uint64_t EventLoop::AddTimer(uint64_t delay_ms, bool repeat, Task t) {
  uint64_t id = next_timer_id_++;
  timer_info_[id] = TimerInfo{repeat ? std::max<uint64_t>(delay_ms, 1) : 0, std::move(t)};
  timers_.push(Timer{MonotonicNs() + delay_ms * 1000000ull, id});
  return id;
}

void EventLoop::CancelTimer(uint64_t id) { timer_info_.erase(id); }

void EventLoop::Post(Task t) {
  bool wake;
  {
    std::lock_guard<std::mutex> lk(post_mu_);
    posted_.push_back(std::move(t));
    wake = !wake_pending_;
    wake_pending_ = true;
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t n = ::write(wakefd_, &one, sizeof(one));
    (void)n;  // EAGAIN means a wakeup is already pending
  }
}

void EventLoop::DrainPosted() {
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> lk(post_mu_);
    tasks.swap(posted_);
    wake_pending_ = false;
  }
  for (auto& t : tasks) t();
}

void EventLoop::Stop() {
  stop_.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t n = ::write(wakefd_, &one, sizeof(one));
  (void)n;
}

int EventLoop::NextTimeoutMs() const {
  if (!deferred_.empty()) return 0;
  if (timers_.empty()) return -1;
  uint64_t now = MonotonicNs();
  uint64_t when = timers_.top().when_ns;
  if (when <= now) return 0;
  return static_cast<int>(std::min<uint64_t>((when - now + 999999) / 1000000, 60000));
}

void EventLoop::RunTimers() {
  uint64_t now = MonotonicNs();
  while (!timers_.empty() && timers_.top().when_ns <= now) {
    Timer t = timers_.top();
    timers_.pop();
    auto it = timer_info_.find(t.id);
    if (it == timer_info_.end()) continue;  // cancelled
    Task task = it->second.task;            // the task may cancel itself
    if (it->second.period_ms > 0) {
      timers_.push(Timer{now + it->second.period_ms * 1000000ull, t.id});
    } else {
      timer_info_.erase(it);
    }
    task();
  }
}

void EventLoop::RunDeferred() {
  while (!deferred_.empty()) {
    std::vector<Task> tasks;
    tasks.swap(deferred_);
    for (auto& t : tasks) t();
  }
}

int EventLoop::Wait(epoll_event* events, int max, int64_t hook_us) {
  const int ms = NextTimeoutMs();
  if (hook_us < 0 || (ms >= 0 && static_cast<int64_t>(ms) * 1000 <= hook_us))
    return ::epoll_wait(epfd_, events, max, ms);
  if (hook_us == 0) return ::epoll_wait(epfd_, events, max, 0);
  // Sub-millisecond: epoll_pwait2 takes a timespec (Linux 5.11); where it is
  // missing or refused (an old kernel, a seccomp filter), the millisecond
  // rounded up, from then on.
  if (!no_pwait2_) {
    timespec ts{static_cast<time_t>(hook_us / 1000000),
                static_cast<long>(hook_us % 1000000) * 1000};
    int n = ::epoll_pwait2(epfd_, events, max, &ts, nullptr);
    if (n >= 0 || errno == EINTR) return n;
    no_pwait2_ = true;
  }
  return ::epoll_wait(epfd_, events, max, static_cast<int>((hook_us + 999) / 1000));
}

void EventLoop::Run() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  int64_t hook_us = -1;
  while (!stop_.load(std::memory_order_acquire)) {
    int n = Wait(events, kMaxEvents, hook_us);
    if (n < 0) {
      if (errno == EINTR) continue;
      LOG_WARNING("epoll_wait: %s", std::strerror(errno));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      auto* h = static_cast<Handler*>(events[i].data.ptr);
      if (h->alive) h->cb(events[i].events);
    }
    RunDeferred();
    graveyard_.clear();
    RunTimers();
    RunDeferred();
    graveyard_.clear();
    if (turn_hook_) hook_us = turn_hook_();
  }
  DrainPosted();
  RunDeferred();
}

}  // namespace pion::net
