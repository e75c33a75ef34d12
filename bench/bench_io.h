// pion-bench's I/O: fatal errors, page-offset buffers, a blocking RESP
// connection, reply parsing and commands built as RESP pieces (bench/pion_bench.cc).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace pion::bench {
[[noreturn]] inline void Fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "pion-bench: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(1);
}

// Payload, body and read buffers start 2 KiB into a page. The kernel copies
// socket data with `rep movsb`, which on this Zen 3 runs far slower when
// (dst - src) mod 4096 is small (glibc's memcpy
// shows the same 4K aliasing). Buffers from malloc sit 16 bytes into a page, and against a SET
// header of about 35 bytes that put the load generator's writes in the slow
// case: with 2 or 8 clients sending 2 MiB values, `_copy_from_iter` was 74 % of
// the client core (31 % with one client) and the client paid 0.73-0.80 CPU-s
// per GB. Measured by source offset (2 clients): 16 or 32 B 0.75, 0 or 64 B
// 0.31, 128 B 0.47, 1024-4000 B 0.25-0.27 CPU-s/GB. That bound both servers'
// SET rows at the client (1.2-1.6 GB/s) instead of measuring them.
constexpr size_t kBufPageOffset = 2048;

template <typename T>
struct PageOffsetAllocator {
  using value_type = T;
  PageOffsetAllocator() = default;
  template <typename U>
  PageOffsetAllocator(const PageOffsetAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    size_t bytes = (n * sizeof(T) + kBufPageOffset + 4095) / 4096 * 4096;
    auto* base = static_cast<char*>(std::aligned_alloc(4096, bytes));
    if (base == nullptr) Fatal("out of memory (%zu bytes)", bytes);
    return reinterpret_cast<T*>(base + kBufPageOffset);
  }
  void deallocate(T* p, size_t) { std::free(reinterpret_cast<char*>(p) - kBufPageOffset); }
  template <typename U>
  bool operator==(const PageOffsetAllocator<U>&) const {
    return true;
  }
};

using Bytes = std::vector<uint8_t, PageOffsetAllocator<uint8_t>>;

class Conn {
 public:
  Conn() = default;
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void Connect(const std::string& host, int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) Fatal("socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) Fatal("bad host '%s'", host.c_str());
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      Fatal("connect %s:%d: %s", host.c_str(), port, std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    buf_.resize(256 * 1024);
  }

  // Writes every byte of the iovecs (blocking).
  void WriteAll(std::vector<iovec>& iov) {
    size_t idx = 0;
    while (idx < iov.size()) {
      int n = static_cast<int>(std::min<size_t>(iov.size() - idx, IOV_MAX));
      ssize_t w = ::writev(fd_, &iov[idx], n);
      if (w < 0) {
        if (errno == EINTR) continue;
        Fatal("write: %s", std::strerror(errno));
      }
      size_t left = static_cast<size_t>(w);
      while (idx < iov.size() && left >= iov[idx].iov_len) {
        left -= iov[idx].iov_len;
        ++idx;
      }
      if (left > 0) {
        iov[idx].iov_base = static_cast<char*>(iov[idx].iov_base) + left;
        iov[idx].iov_len -= left;
      }
    }
  }

  // A line without its CRLF (valid until the next read).
  std::string_view ReadLine() {
    for (;;) {
      const char* p = static_cast<const char*>(std::memchr(buf_.data() + pos_, '\n', len_ - pos_));
      if (p != nullptr) {
        size_t end = static_cast<size_t>(p - buf_.data());
        if (end == pos_ || buf_[end - 1] != '\r') Fatal("protocol: bare LF in reply");
        std::string_view line(buf_.data() + pos_, end - 1 - pos_);
        pos_ = end + 1;
        return line;
      }
      Fill();
    }
  }

  // Reads exactly n bytes into dst (buffered bytes first, then straight from
  // the socket so large bulks are copied once).
  void ReadExact(uint8_t* dst, size_t n) {
    size_t have = std::min(n, len_ - pos_);
    std::memcpy(dst, buf_.data() + pos_, have);
    pos_ += have;
    dst += have;
    n -= have;
    while (n > 0) {
      ssize_t r = ::recv(fd_, dst, n, 0);
      if (r == 0) Fatal("server closed the connection");
      if (r < 0) {
        if (errno == EINTR) continue;
        Fatal("recv: %s", std::strerror(errno));
      }
      dst += r;
      n -= static_cast<size_t>(r);
    }
  }

 private:
  void Fill() {
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, len_ - pos_);
      len_ -= pos_;
      pos_ = 0;
    }
    if (len_ == buf_.size()) buf_.resize(buf_.size() * 2);
    for (;;) {
      ssize_t r = ::recv(fd_, buf_.data() + len_, buf_.size() - len_, 0);
      if (r == 0) Fatal("server closed the connection");
      if (r < 0) {
        if (errno == EINTR) continue;
        Fatal("recv: %s", std::strerror(errno));
      }
      len_ += static_cast<size_t>(r);
      return;
    }
  }

  int fd_ = -1;
  std::vector<char, PageOffsetAllocator<char>> buf_;  // replies are read into it too
  size_t pos_ = 0;
  size_t len_ = 0;
};

// One parsed reply. For bulk strings the body lands in `body` (resized).
struct Reply {
  char type = 0;  // '+', '-', ':', '$', '*', or 'n' (null)
  std::string line;
  int64_t len = 0;
};

// Reads one reply; bulk bodies go into *body; arrays are read and discarded
// (their element count kept in len).
inline Reply ReadReply(Conn& c, Bytes* body) {
  Reply r;
  std::string_view l = c.ReadLine();
  if (l.empty()) Fatal("protocol: empty reply line");
  r.type = l[0];
  r.line.assign(l.substr(1));
  switch (r.type) {
    case '+':
    case '-':
    case ':':
      return r;
    case '$':
    case '*': {
      r.len = std::strtoll(r.line.c_str(), nullptr, 10);
      if (r.len < 0) {
        r.type = 'n';
        return r;
      }
      if (r.type == '$') {
        body->resize(static_cast<size_t>(r.len) + 2);
        c.ReadExact(body->data(), body->size());
        if ((*body)[r.len] != '\r' || (*body)[r.len + 1] != '\n')
          Fatal("protocol: bulk not terminated by CRLF");
        body->resize(static_cast<size_t>(r.len));
      } else {
        Bytes tmp;
        for (int64_t i = 0; i < r.len; ++i) ReadReply(c, &tmp);
      }
      return r;
    }
    case '_':  // RESP3 null
      r.type = 'n';
      return r;
    default:
      Fatal("protocol: unexpected reply type '%c' (%s)", r.type, std::string(l).c_str());
  }
}

// A command as RESP: pieces referencing long-lived storage (args are copied
// into owned strings, large blobs are referenced).
class Command {
 public:
  void Arg(std::string s) {
    Piece p;
    p.owned = "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
    pieces_.push_back(std::move(p));
  }
  void Blob(const uint8_t* data, size_t n) {
    Piece head;
    head.owned = "$" + std::to_string(n) + "\r\n";
    pieces_.push_back(std::move(head));
    Piece body;
    body.ref = data;
    body.ref_len = n;
    pieces_.push_back(std::move(body));
    Piece tail;
    tail.owned = "\r\n";
    pieces_.push_back(std::move(tail));
    ++blobs_;
  }
  // Appends iovecs of the whole command (valid while *this lives).
  void AppendIov(std::vector<iovec>* iov) {
    if (header_.empty()) header_ = "*" + std::to_string(pieces_.size() - 2 * blobs_) + "\r\n";
    iov->push_back({header_.data(), header_.size()});
    // Coalesce adjacent owned pieces for fewer iovecs.
    for (Piece& p : pieces_) {
      if (p.ref != nullptr) {
        iov->push_back({const_cast<uint8_t*>(p.ref), p.ref_len});
      } else {
        iov->push_back({p.owned.data(), p.owned.size()});
      }
    }
  }

 private:
  struct Piece {
    std::string owned;
    const uint8_t* ref = nullptr;
    size_t ref_len = 0;
  };
  std::vector<Piece> pieces_;
  std::string header_;
  size_t blobs_ = 0;
};

}  // namespace pion::bench
