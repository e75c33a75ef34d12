// RingQueue<T>: a FIFO over one growable power-of-two ring of T, for the
// per-connection queues that every reply goes through (OutputQueue's segments
// and arena blocks). Unlike std::deque, which allocates and frees a node every
// few elements as the queue moves forward, a ring that has grown to its
// working size never allocates again (zero heap allocations per
// small command in steady state).
//
// Indexing is from the front (0 = oldest). A popped or erased slot is reset to
// T() at once (what it held, e.g. a pin, is released then). Insert and Erase
// in the middle shift the elements after the position (O(n); rare paths).
// References stay valid until the next Grow (a push when full), Insert or
// Erase. Thread-safety: none (one owner thread).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace pion::net {

template <typename T>
class RingQueue {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & mask_]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T&& v) {
    if (size_ == buf_.size()) Grow();
    buf_[(head_ + size_) & mask_] = std::move(v);
    ++size_;
  }
  void pop_front() {
    buf_[head_] = T();
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  // Inserts `v` before position `i` (i <= size()).
  void Insert(size_t i, T&& v) {
    push_back(std::move(v));
    for (size_t j = size_ - 1; j > i; --j) std::swap((*this)[j], (*this)[j - 1]);
  }
  // Removes the element at position `i`.
  void Erase(size_t i) {
    for (size_t j = i; j + 1 < size_; ++j) (*this)[j] = std::move((*this)[j + 1]);
    (*this)[size_ - 1] = T();
    --size_;
  }
  void clear() {
    while (!empty()) pop_front();
    head_ = 0;
  }

  template <typename Q, typename V>
  class Iter {
   public:
    Iter(Q* q, size_t i) : q_(q), i_(i) {}
    V& operator*() const { return (*q_)[i_]; }
    V* operator->() const { return &(*q_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }
    bool operator==(const Iter& o) const { return i_ == o.i_; }

   private:
    Q* q_;
    size_t i_;
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  void Grow() {
    std::vector<T> nb(buf_.empty() ? 8 : buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) nb[i] = std::move((*this)[i]);
    buf_ = std::move(nb);
    head_ = 0;
    mask_ = buf_.size() - 1;
  }

  std::vector<T> buf_;  // size 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace pion::net
