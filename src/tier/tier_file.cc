// See tier_file.h and docs/tier_format.md.
#include "tier/tier_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/atomic_raise.h"
#include "base/crc32c.h"

namespace pion::tier {

namespace {

uint64_t RoundUp(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t HeaderCrc(const uint8_t* h, uint32_t header_bytes) {
  uint32_t c = crc32c::Extend(0, h, 60);
  const uint8_t zero[4] = {0, 0, 0, 0};
  c = crc32c::Extend(c, zero, 4);
  return crc32c::Extend(c, h + 64, header_bytes - 64);
}

void FreeAligned(void* p, size_t) { std::free(p); }

OwnedBuffer AlignedBuffer(size_t n) {
  void* p = std::aligned_alloc(kBlock, n);
  return p == nullptr ? OwnedBuffer() : OwnedBuffer(p, n, FreeAligned);
}

// The bytes per direct write: a staging buffer of this size per call.
constexpr uint64_t kStage = 8ull << 20;

// Big reads are split into pieces read together through the thread's
// io_uring, so that the value's CRC is computed on the pieces already read
// while the device reads the rest (one pass over the bytes, overlapped).
constexpr uint64_t kPiece = 1ull << 20;  // at least; at most kRingDepth pieces
constexpr unsigned kRingDepth = 16;

// The calling thread's ring, made on first use; null where io_uring is not
// available (an old kernel, a sandbox that forbids it) or after it failed once:
// reads are then one pread.
struct ThreadRing {
  io_uring ring{};
  bool ok = false;
  bool tried = false;
  ~ThreadRing() { Close(); }
  void Close() {
    if (ok) io_uring_queue_exit(&ring);
    ok = false;
  }
  io_uring* get() {
    if (!tried) {
      tried = true;
      ok = io_uring_queue_init(kRingDepth, &ring, 0) == 0;
    }
    return ok ? &ring : nullptr;
  }
};

ThreadRing& ThisThreadRing() {
  static thread_local ThreadRing r;
  return r;
}

}  // namespace

uint32_t HeaderBytes(size_t key_len) {
  return static_cast<uint32_t>(RoundUp(kHeaderFixed + key_len));
}
uint64_t ExtentBytes(size_t key_len, uint64_t value_len) {
  return RoundUp(HeaderBytes(key_len) + value_len);
}

void EncodeHeader(uint8_t* h, uint32_t header_bytes, std::string_view key, uint64_t value_len,
                  uint32_t value_crc, uint64_t seq) {
  std::memcpy(h, kMagic, 8);
  Put32(h + 8, kVersion);
  Put32(h + 12, header_bytes);
  Put64(h + 16, value_len);
  Put32(h + 24, static_cast<uint32_t>(key.size()));
  Put32(h + 28, value_crc);
  Put64(h + 32, seq);
  std::memcpy(h + 64, key.data(), key.size());
  Put32(h + 60, HeaderCrc(h, header_bytes));
}

Status DecodeHeader(const uint8_t* h, size_t avail, uint32_t* header_bytes, uint64_t* value_len,
                    std::string_view* key, uint32_t* value_crc) {
  if (avail < kBlock || std::memcmp(h, kMagic, 8) != 0) return Status::Corruption("bad magic");
  if (Get32(h + 8) != kVersion) return Status::Corruption("unknown version");
  const uint32_t hb = Get32(h + 12);
  const uint32_t klen = Get32(h + 24);
  if (hb % kBlock != 0 || hb < kHeaderFixed + static_cast<uint64_t>(klen) || hb > avail)
    return Status::Corruption("bad header length");
  if (HeaderCrc(h, hb) != Get32(h + 60)) return Status::Corruption("header checksum mismatch");
  *header_bytes = hb;
  *value_len = Get64(h + 16);
  *key = std::string_view(reinterpret_cast<const char*>(h + 64), klen);
  *value_crc = Get32(h + 28);
  return Status::OK();
}

namespace {
struct SnapshotPin {
  explicit SnapshotPin(ExtentRef e) : x(std::move(e)) { x->snapshot_pins.fetch_add(1); }
  ~SnapshotPin() { x->snapshot_pins.fetch_sub(1); }
  SnapshotPin(const SnapshotPin&) = delete;
  SnapshotPin& operator=(const SnapshotPin&) = delete;
  ExtentRef x;
};
}  // namespace

std::shared_ptr<const void> PinForSnapshot(ExtentRef x) {
  return std::make_shared<SnapshotPin>(std::move(x));
}

Extent::~Extent() {
  if (file != nullptr) file->Free(offset, length);
}

const uint8_t* Extent::mapped() const { return file->map_base() + offset + header_bytes; }

Result<std::shared_ptr<TierFile>> TierFile::Open(const std::string& dir, uint64_t max_bytes,
                                                 bool adopt) {
  if (max_bytes == 0 || max_bytes > kMaxTierBytes)
    return Status::InvalidArgument("tier-maxbytes out of range");
  ::mkdir(dir.c_str(), 0700);
  std::shared_ptr<TierFile> t(new TierFile());
  t->path_ = dir + "/" + kFileName;
  const int trunc = adopt ? 0 : O_TRUNC;
  t->fd_ = ::open(t->path_.c_str(), O_RDWR | O_CREAT | trunc | O_DIRECT | O_CLOEXEC, 0600);
  if (t->fd_ < 0 && errno == EINVAL) {
    // A file system without direct I/O (tmpfs): the same layout through the page cache.
    t->fd_ = ::open(t->path_.c_str(), O_RDWR | O_CREAT | trunc | O_CLOEXEC, 0600);
    t->direct_ = false;
  }
  if (t->fd_ < 0) return Status::IOError("open " + t->path_ + ": " + std::strerror(errno));
  if (adopt) {
    // The old file's space is set aside: nothing is allocated in it until
    // FinishAdopt (allocations meanwhile go after it).
    struct stat sb;
    if (::fstat(t->fd_, &sb) != 0)
      return Status::IOError("stat " + t->path_ + ": " + std::strerror(errno));
    t->adopting_ = true;
    t->old_size_ = static_cast<uint64_t>(sb.st_size);
    t->adopt_limit_ = RoundUp(t->old_size_);
    t->end_ = t->adopt_limit_;
  }
  // Address space for the whole tier, reserved once (the mapping never moves,
  // so values and chunks may point into it): 16 TiB where the process may
  // (sanitizers reserve much of the address space), else less, never below
  // four times the starting bound.
  void* m = MAP_FAILED;
  for (uint64_t want : {kMaxTierBytes, uint64_t{1} << 40, uint64_t{64} << 30,
                        std::max<uint64_t>(4 * max_bytes, uint64_t{1} << 30)}) {
    if (want < max_bytes) continue;
    m = ::mmap(nullptr, want, PROT_READ, MAP_SHARED | MAP_NORESERVE, t->fd_, 0);
    if (m != MAP_FAILED) {
      t->map_bytes_ = want;
      break;
    }
  }
  if (m == MAP_FAILED) return Status::IOError("mmap " + t->path_ + ": " + std::strerror(errno));
  t->map_ = static_cast<uint8_t*>(m);
  t->max_bytes_ = max_bytes;
  return t;
}

TierFile::~TierFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void TierFile::set_max_bytes(uint64_t n) { max_bytes_.store(n, std::memory_order_relaxed); }

ExtentRef TierFile::Allocate(std::string_view key, uint64_t value_len) {
  const uint64_t need = ExtentBytes(key.size(), value_len);
  uint64_t off = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (used_.load(std::memory_order_relaxed) + need > max_bytes()) return nullptr;
    auto it = free_by_len_.lower_bound(need);  // best fit among freed runs
    if (it != free_by_len_.end()) {
      off = it->second;
      const uint64_t len = it->first;
      free_by_len_.erase(it);
      free_by_off_.erase(off);
      if (len > need) {
        free_by_off_[off + need] = len - need;
        free_by_len_.emplace(len - need, off + need);
      }
    } else {
      if (end_ + need > map_bytes_) return nullptr;
      off = end_;
      end_ += need;
    }
    used_.fetch_add(need, std::memory_order_relaxed);
  }
  extents_.fetch_add(1, std::memory_order_relaxed);
  auto x = std::make_shared<Extent>();
  x->file = shared_from_this();
  x->offset = off;
  x->length = need;
  x->header_bytes = HeaderBytes(key.size());
  x->key = key;
  x->value_len = value_len;
  return x;
}

void TierFile::Free(uint64_t offset, uint64_t length) {
  // Give the blocks back to the file system before they are reused (not while
  // stopping: the last snapshot may reference them for the next start).
  if (!keep_freed_.load(std::memory_order_relaxed))
    ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                static_cast<off_t>(length));
  std::lock_guard<std::mutex> l(mu_);
  if (adopting_ && offset < adopt_limit_)
    adopted_.erase(offset);  // in the old file's space: FinishAdopt frees it with the gaps
  else
    ReleaseLocked(offset, length);
  used_.fetch_sub(length, std::memory_order_relaxed);
  extents_.fetch_sub(1, std::memory_order_relaxed);
}

void TierFile::ReleaseLocked(uint64_t offset, uint64_t length) {
  uint64_t off = offset, len = length;
  auto next = free_by_off_.lower_bound(off);
  if (next != free_by_off_.begin()) {  // coalesce with the run before
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      auto r = free_by_len_.equal_range(prev->second);
      for (auto it = r.first; it != r.second; ++it)
        if (it->second == prev->first) {
          free_by_len_.erase(it);
          break;
        }
      off = prev->first;
      len += prev->second;
      free_by_off_.erase(prev);
    }
  }
  next = free_by_off_.lower_bound(off + len);
  if (next != free_by_off_.end() && next->first == off + len) {  // and the run after
    auto r = free_by_len_.equal_range(next->second);
    for (auto it = r.first; it != r.second; ++it)
      if (it->second == next->first) {
        free_by_len_.erase(it);
        break;
      }
    len += next->second;
    free_by_off_.erase(next);
  }
  if (off + len == end_) {
    end_ = off;  // the tail of the file is free again
  } else {
    free_by_off_[off] = len;
    free_by_len_.emplace(len, off);
  }
}

namespace {
// Checks a header read at `id.offset` against `id` and `key`.
Status MatchHeader(const uint8_t* h, size_t avail, std::string_view key, const ExtentId& id) {
  uint32_t hb = 0, crc = 0;
  uint64_t vlen = 0;
  std::string_view k;
  PION_RETURN_IF_ERROR(DecodeHeader(h, avail, &hb, &vlen, &k, &crc));
  if (hb != id.header_bytes || vlen != id.value_len || k != key || crc != id.value_crc ||
      Get64(h + 32) != id.seq)
    return Status::Corruption("header does not match the snapshot's reference");
  return Status::OK();
}

Status CheckId(std::string_view key, const ExtentId& id) {
  if (id.offset % kBlock != 0 || id.header_bytes != HeaderBytes(key.size()) ||
      id.value_len > kMaxTierBytes || id.length != ExtentBytes(key.size(), id.value_len))
    return Status::Corruption("reference does not describe an extent for its key");
  return Status::OK();
}
}  // namespace

Result<ExtentRef> TierFile::Adopt(std::string_view key, const ExtentId& id) {
  PION_RETURN_IF_ERROR(CheckId(key, id));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!adopting_) return Status::InvalidArgument("the tier file is not being adopted");
    if (id.offset > old_size_ || id.length > old_size_ - id.offset ||
        id.offset + id.length > map_bytes_)
      return Status::Corruption("extent beyond the end of the tier file");
    auto next = adopted_.lower_bound(id.offset);
    if ((next != adopted_.end() && next->first < id.offset + id.length) ||
        (next != adopted_.begin() && std::prev(next)->first + std::prev(next)->second > id.offset))
      return Status::Corruption("extent overlaps another referenced extent");
    if (used_.load(std::memory_order_relaxed) + id.length > max_bytes())
      return Status::OutOfBudget("tier-maxbytes reached");
  }
  OwnedBuffer h = AlignedBuffer(id.header_bytes);
  if (h.empty()) return Status::OutOfBudget("tier header buffer");
  PION_RETURN_IF_ERROR(PreadAll(static_cast<uint8_t*>(h.data()), id.header_bytes, id.offset));
  PION_RETURN_IF_ERROR(
      MatchHeader(static_cast<const uint8_t*>(h.data()), id.header_bytes, key, id));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!adopting_) return Status::InvalidArgument("the tier file is not being adopted");
    if (!adopted_.emplace(id.offset, id.length).second)
      return Status::Corruption("extent overlaps another referenced extent");
    used_.fetch_add(id.length, std::memory_order_relaxed);
  }
  extents_.fetch_add(1, std::memory_order_relaxed);
  base::AtomicRaise(&seq_, id.seq);
  auto x = std::make_shared<Extent>();
  x->file = shared_from_this();
  x->offset = id.offset;
  x->length = id.length;
  x->header_bytes = id.header_bytes;
  x->key = key;
  x->value_len = id.value_len;
  x->value_crc = id.value_crc;
  x->seq = id.seq;
  x->written.store(true, std::memory_order_release);
  return x;
}

void TierFile::FinishAdopt() {
  std::lock_guard<std::mutex> l(mu_);
  if (!adopting_) return;
  adopting_ = false;
  // The gaps between the adopted extents, up to the old length, are free.
  uint64_t at = 0;
  auto release = [&](uint64_t upto) {
    if (upto <= at) return;
    if (!keep_freed_.load(std::memory_order_relaxed))
      ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(at),
                  static_cast<off_t>(upto - at));
    ReleaseLocked(at, upto - at);
  };
  for (const auto& [off, len] : adopted_) {
    release(off);
    at = off + len;
  }
  release(adopt_limit_);  // (end_ >= adopt_limit_: nothing below it was free)
  adopted_.clear();
  if (end_ == 0) (void)::ftruncate(fd_, 0);  // nothing adopted, nothing written: empty
}

Status TierFile::Sync() {
  if (::fdatasync(fd_) != 0)
    return Status::IOError("fdatasync " + path_ + ": " + std::strerror(errno));
  return Status::OK();
}

Status TierFile::VerifyExtentAt(const std::string& path, std::string_view key, const ExtentId& id,
                                bool check_value) {
  PION_RETURN_IF_ERROR(CheckId(key, id));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("open " + path + ": " + std::strerror(errno));
  struct stat sb;
  Status st;
  if (::fstat(fd, &sb) != 0 || id.offset + id.length > static_cast<uint64_t>(sb.st_size))
    st = Status::Corruption("extent beyond the end of the tier file");
  const uint64_t n = check_value ? id.length : id.header_bytes;
  std::vector<uint8_t> buf;
  if (st.ok()) {
    buf.resize(n);
    uint64_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(id.offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        st = Status::Corruption("short read");
        break;
      }
      got += static_cast<uint64_t>(r);
    }
  }
  ::close(fd);
  PION_RETURN_IF_ERROR(st);
  PION_RETURN_IF_ERROR(MatchHeader(buf.data(), buf.size(), key, id));
  if (check_value && crc32c::Value(buf.data() + id.header_bytes, id.value_len) != id.value_crc)
    return Status::Corruption("value checksum mismatch");
  return Status::OK();
}

Status TierFile::Write(Extent& x, const uint8_t* data, uint64_t n) {
  if (n != x.value_len) return Status::InvalidArgument("value length differs from the extent's");
  return Write(
      x, [data](uint64_t off, uint8_t* dst, uint64_t len) { std::memcpy(dst, data + off, len); });
}

Status TierFile::PwriteAll(const uint8_t* p, uint64_t n, uint64_t at) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::IOError(std::string("tier write: ") + std::strerror(errno));
    if (w == 0) return Status::IOError("tier write: no progress");
    done += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status TierFile::Write(Extent& x, const Filler& fill) {
  if (fail_writes_.load() > 0 && fail_writes_.fetch_sub(1) > 0)
    return Status::IOError("injected write error");
  // One staging buffer per thread, kept: fresh pages cost a first touch each.
  thread_local OwnedBuffer stage;
  if (stage.empty()) stage = AlignedBuffer(kStage);
  if (stage.empty()) return Status::OutOfBudget("tier staging buffer");
  // The extent's blocks first (a short metadata step), so that the data write
  // is an overwrite inside the file: a direct write that extends the file or
  // fills a hole takes the inode's lock exclusively for the whole transfer
  // (ext4, xfs), so the I/O threads' writes, appended at the file's end, went
  // to the device one at a time. Where fallocate is not supported the write
  // goes ahead as before.
  if (direct_)
    (void)::fallocate(fd_, 0, static_cast<off_t>(x.offset), static_cast<off_t>(x.length));
  const uint64_t stage_bytes = std::min<uint64_t>(x.length, kStage);
  uint8_t* s = static_cast<uint8_t*>(stage.data());
  const uint64_t v = x.value_len;
  if (x.length <= kStage) {
    // The whole extent fits the stage: header and value in one direct write
    // (a second, header-only write would wait for the device once more). A
    // torn write leaves a header whose value's CRC does not match.
    uint8_t* val = s + x.header_bytes;
    if (v > 0) fill(0, val, v);
    const uint32_t crc = v > 0 ? crc32c::Value(val, v) : 0;
    std::memset(val + v, 0, x.length - x.header_bytes - v);
    std::memset(s, 0, x.header_bytes);
    x.value_crc = crc;
    x.seq = seq_.fetch_add(1) + 1;
    EncodeHeader(s, x.header_bytes, x.key, v, crc, x.seq);
    PION_RETURN_IF_ERROR(PwriteAll(s, x.length, x.offset));
    x.written.store(true, std::memory_order_release);
    return Status::OK();
  }
  // A bigger one: the value (and its zero padding) first, staged piece by
  // piece, its CRC taken on the way; the header, which holds that CRC, last.
  uint32_t crc = 0;
  for (uint64_t pos = x.header_bytes; pos < x.length;) {
    const uint64_t piece = std::min<uint64_t>(stage_bytes, x.length - pos);
    const uint64_t vstart = pos - x.header_bytes;
    const uint64_t take = vstart < v ? std::min<uint64_t>(piece, v - vstart) : 0;
    if (take > 0) {
      fill(vstart, s, take);
      crc = crc32c::Extend(crc, s, take);
    }
    std::memset(s + take, 0, piece - take);
    PION_RETURN_IF_ERROR(PwriteAll(s, piece, x.offset + pos));
    pos += piece;
  }
  std::memset(s, 0, x.header_bytes);
  x.value_crc = crc;
  x.seq = seq_.fetch_add(1) + 1;
  EncodeHeader(s, x.header_bytes, x.key, v, crc, x.seq);
  PION_RETURN_IF_ERROR(PwriteAll(s, x.header_bytes, x.offset));
  x.written.store(true, std::memory_order_release);
  return Status::OK();
}

Result<OwnedBuffer> TierFile::ReadBuffer(const Extent& x, size_t* at) {
  OwnedBuffer buf;
  size_t skip = 0;
  if (at != nullptr && x.length >= BufferRecycler::kMinBytes) {
    // A recycled block (pages already faulted in: a fresh one costs a first
    // touch per page, about as much as the read), aligned inside for O_DIRECT.
    auto [block, cap] = BufferRecycler::Global().Take(x.length + kBlock);
    if (block == nullptr) {
      // None cached: a new one that goes back to the recycler when the value
      // is released, sized so that the next read of this size takes it. (A
      // freshly mapped buffer the device wrote is slow to read the first time
      // on a VM whose guest reports free pages to the host: 18 ms for 16 MiB
      // against 1 ms reused, measured; which made every cold GET pay it.)
      const size_t n = RoundUp(x.length + kBlock);
      block = std::aligned_alloc(kBlock, n);
      cap = block != nullptr ? n : 0;
    }
    if (block != nullptr) {
      buf = OwnedBuffer(block, cap, BufferRecycler::ReleaseToGlobal);
      skip = (kBlock - reinterpret_cast<uintptr_t>(block) % kBlock) % kBlock;
    }
  }
  if (buf.empty()) buf = AlignedBuffer(x.length);
  if (buf.empty()) return Status::OutOfBudget("tier read buffer");
  if (at != nullptr) *at = skip;
  return buf;
}

Status TierFile::CheckRead(const Extent& x, const uint8_t* p) const {
  return CheckExtent(x, p, nullptr);
}

Status TierFile::CheckExtent(const Extent& x, const uint8_t* p, const uint32_t* value_crc) const {
  uint32_t hb = 0, crc = 0;
  uint64_t vlen = 0;
  std::string_view k;
  PION_RETURN_IF_ERROR(DecodeHeader(p, x.length, &hb, &vlen, &k, &crc));
  if (hb != x.header_bytes || vlen != x.value_len || hb + vlen > x.length || k != x.key)
    return Status::Corruption("header does not match the index");
  const uint32_t got = value_crc != nullptr ? *value_crc : crc32c::Value(p + hb, vlen);
  if (got != crc) return Status::Corruption("value checksum mismatch");
  return Status::OK();
}

Result<OwnedBuffer> TierFile::Read(const Extent& x, size_t* at) {
  if (TakeInjectedReadFailure()) return Status::IOError("injected read error");
  size_t skip = 0;
  auto b = ReadBuffer(x, at != nullptr ? &skip : nullptr);
  if (!b.ok()) return b.status();
  OwnedBuffer buf = std::move(*b);
  if (at != nullptr) *at = skip;
  uint8_t* p = static_cast<uint8_t*>(buf.data()) + skip;
  uint32_t value_crc = 0;
  bool crc_done = false;
  io_uring* ring = x.length >= 4 * kPiece ? ThisThreadRing().get() : nullptr;
  if (ring != nullptr) {
    bool abandon = false;
    Status st = ReadPieces(ring, x, p, &value_crc, &abandon);
    if (abandon) {
      // The ring failed with reads possibly still in flight into this buffer: it
      // is never freed (once per thread at most: the thread reads with pread now).
      new OwnedBuffer(std::move(buf));
      return st;
    }
    if (st.code() == Code::kNotSupported) {
      ring = nullptr;  // the ring refused: pread below
    } else if (!st.ok()) {
      return st;
    } else {
      crc_done = true;
      piece_reads_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (ring == nullptr) PION_RETURN_IF_ERROR(PreadAll(p, x.length, x.offset));
  PION_RETURN_IF_ERROR(CheckExtent(x, p, crc_done ? &value_crc : nullptr));
  return buf;
}

bool TierFile::PieceReadsSupported() { return ThisThreadRing().get() != nullptr; }

Status TierFile::PreadAll(uint8_t* p, uint64_t n, uint64_t at) {
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd_, p + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::IOError(std::string("tier read: ") + std::strerror(errno));
    if (r == 0) return Status::Corruption("short read");
    got += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Status TierFile::ReadPieces(io_uring* ring, const Extent& x, uint8_t* p, uint32_t* value_crc,
                            bool* abandon) {
  // At most kRingDepth pieces, all submitted at once; the CRC of the value
  // ([header_bytes, header_bytes + value_len) of the extent) advances over the
  // pieces read so far, in order, while the later ones are still being read.
  const uint64_t piece = std::max(kPiece, RoundUp((x.length + kRingDepth - 1) / kRingDepth));
  const uint64_t n = (x.length + piece - 1) / piece;
  auto len_of = [&](uint64_t i) { return std::min(piece, x.length - i * piece); };
  for (uint64_t i = 0; i < n; ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: n <= kRingDepth, all reaped
    io_uring_prep_read(sqe, fd_, p + i * piece, static_cast<unsigned>(len_of(i)),
                       x.offset + i * piece);
    io_uring_sqe_set_data64(sqe, i);
  }
  uint64_t submitted = 0;
  while (submitted < n) {
    const int r = io_uring_submit(ring);
    if (r == -EINTR) continue;
    if (r <= 0) break;
    submitted += static_cast<uint64_t>(r);
  }
  Status err;
  if (submitted < n) {
    // The kernel took only some (or none): reap those, then stop using the ring
    // (closing it drops what it never took) and read with pread.
    err = Status(Code::kNotSupported, "io_uring refused the reads");
  }
  uint8_t done[kRingDepth] = {};
  uint64_t reaped = 0, next_crc = 0;
  uint32_t crc = 0;
  while (reaped < submitted) {
    io_uring_cqe* cqe = nullptr;
    int wr = io_uring_wait_cqe(ring, &cqe);
    if (wr == -EINTR) continue;
    if (wr < 0) {
      ThisThreadRing().Close();
      *abandon = true;
      return Status::IOError(std::string("tier read: io_uring: ") + std::strerror(-wr));
    }
    const uint64_t i = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    ++reaped;
    if (res < 0) {
      if (err.ok()) err = Status::IOError(std::string("tier read: ") + std::strerror(-res));
    } else if (static_cast<uint64_t>(res) < len_of(i)) {  // short (rare): the rest by pread
      Status s = PreadAll(p + i * piece + res, len_of(i) - res, x.offset + i * piece + res);
      if (!s.ok() && err.ok()) err = s;
    }
    done[i] = 1;
    while (err.ok() && next_crc < n && done[next_crc] != 0) {
      const uint64_t lo = std::max<uint64_t>(next_crc * piece, x.header_bytes);
      const uint64_t hi = std::min<uint64_t>(next_crc * piece + len_of(next_crc),
                                             uint64_t{x.header_bytes} + x.value_len);
      if (hi > lo) crc = crc32c::Extend(crc, p + lo, hi - lo);
      ++next_crc;
    }
  }
  if (err.code() == Code::kNotSupported) ThisThreadRing().Close();
  if (!err.ok()) return err;
  *value_crc = crc;
  return Status::OK();
}

Status TierFile::CorruptForTest(const Extent& x) {
  OwnedBuffer b = AlignedBuffer(kBlock);
  const uint64_t at = (x.offset + x.header_bytes) / kBlock * kBlock;
  if (::pread(fd_, b.data(), kBlock, static_cast<off_t>(at)) != static_cast<ssize_t>(kBlock))
    return Status::IOError("pread");
  static_cast<uint8_t*>(b.data())[(x.offset + x.header_bytes) % kBlock] ^= 0xff;
  if (::pwrite(fd_, b.data(), kBlock, static_cast<off_t>(at)) != static_cast<ssize_t>(kBlock))
    return Status::IOError("pwrite");
  return Status::OK();
}

}  // namespace pion::tier
