// AtomicRaise: a monotonic maximum kept in an atomic (a peak, an LSN, a clock,
// a sequence number). Stores `v` unless the atomic already holds at least
// `v`; returns whether this call stored it. Any thread; a racing raise never
// lowers the value.
#pragma once

#include <atomic>

namespace pion::base {

template <class T>
bool AtomicRaise(std::atomic<T>* a, T v, std::memory_order order = std::memory_order_seq_cst) {
  const std::memory_order load_order =
      order == std::memory_order_relaxed ? std::memory_order_relaxed : std::memory_order_seq_cst;
  T cur = a->load(load_order);
  while (cur < v) {
    if (a->compare_exchange_weak(cur, v, order, load_order)) return true;
  }
  return false;
}

}  // namespace pion::base
