// EventLoop's turn hook: it runs at the end of every turn, and the loop sleeps no
// longer than the hook asks, so work a hook holds back leaves with no other event.
#include "net/event_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace pion::net {
namespace {

TEST(EventLoopTurnHook, TheLoopWakesForTheHookWithNoOtherEvent) {
  EventLoop loop;
  ASSERT_TRUE(loop.Init().ok());
  // The hook asks for 300 us, five times, then stops the loop: nothing else
  // ever wakes it (no fd, no timer, no post).
  int calls = 0;
  loop.SetTurnHook([&]() -> int64_t {
    if (++calls > 5) {
      loop.Stop();
      return -1;
    }
    return 300;
  });
  // A hang guard, not a timing: the first turn only ends when something wakes
  // the loop, so one post starts it; a loop that never woke for the hook would
  // be stopped here after 10 s and fail the count below.
  std::atomic<bool> done{false};
  std::thread guard([&] {
    const uint64_t until = MonotonicUs() + 10'000'000;
    while (!done.load() && MonotonicUs() < until) std::this_thread::yield();
    if (!done.load()) loop.Stop();
  });
  loop.Post([] {});
  loop.Run();
  done.store(true);
  guard.join();
  EXPECT_EQ(calls, 6);
}

TEST(EventLoopTurnHook, RunsAfterTheTurnsCallbacksAndTimers) {
  EventLoop loop;
  ASSERT_TRUE(loop.Init().ok());
  std::vector<char> order;
  loop.AddTimer(0, false, [&] { order.push_back('t'); });
  loop.Post([&] {
    order.push_back('p');
    loop.Defer([&] { order.push_back('d'); });
  });
  loop.SetTurnHook([&]() -> int64_t {
    order.push_back('h');
    if (order.size() >= 4) loop.Stop();
    return -1;
  });
  loop.Run();
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(order.back(), 'h');
  // Whatever ran in the turn that ended with the last hook ran before it.
  EXPECT_NE(std::find(order.begin(), order.end(), 't'), order.end());
  EXPECT_NE(std::find(order.begin(), order.end(), 'd'), order.end());
}

}  // namespace
}  // namespace pion::net
