// See tier_check.h and docs/tier_format.md §4.
#include "tier/tier_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/crc32c.h"
#include "tier/tier_file.h"

namespace pion::tier {

namespace {

// A header longer than this (a key of about 64 MiB) is not read whole: reported
// as damaged rather than allocated.
constexpr uint64_t kMaxHeaderBytes = 64ull << 20;
// The value is checked this many bytes at a time.
constexpr size_t kChunk = 8u << 20;

uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

bool AllZero(const uint8_t* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

// Reads exactly n bytes at off, or says why not.
Status ReadExact(const TierSource& src, uint64_t off, size_t n, uint8_t* out) {
  auto r = src.ReadAt(off, n, out);
  if (!r.ok()) return r.status();
  if (*r != n) return Status::Corruption("short read");
  return Status::OK();
}

class FileSource : public TierSource {
 public:
  FileSource(int fd, uint64_t size) : fd_(fd), size_(size) {}
  uint64_t size() const override { return size_; }
  Result<size_t> ReadAt(uint64_t off, size_t n, uint8_t* out) const override {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, out + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::IOError(std::string("read: ") + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  uint64_t NextData(uint64_t off) const override {
    off_t d = ::lseek(fd_, static_cast<off_t>(off), SEEK_DATA);
    if (d >= 0) return static_cast<uint64_t>(d);
    return errno == ENXIO ? size_ : off;  // ENXIO: only holes follow; else unknown
  }

 private:
  int fd_;
  uint64_t size_;
};

class Walker {
 public:
  Walker(const TierSource& src, TierCheckReport* rep) : src_(src), rep_(rep) {}

  Status Run() {
    const uint64_t size = src_.size();
    rep_->file_bytes = size;
    block_.resize(kBlock);
    uint64_t off = 0;
    while (off < size) {
      const uint64_t d = src_.NextData(off);
      if (d >= size) {
        rep_->hole_bytes += size - off;
        break;
      }
      const uint64_t at = d / kBlock * kBlock;  // data resumes in this block
      if (at > off) {
        rep_->hole_bytes += at - off;
        off = at;
      }
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kBlock, size - off));
      PION_RETURN_IF_ERROR(ReadExact(src_, off, want, block_.data()));
      if (AllZero(block_.data(), want)) {
        rep_->zero_bytes += want;
        off += want;
        continue;
      }
      if (want < kBlock) {  // a partial block at the end is never an extent
        Stray(off, want);
        break;
      }
      uint64_t next = 0;
      PION_RETURN_IF_ERROR(Extent(off, &next));
      off = next;
    }
    return Status::OK();
  }

 private:
  void Stray(uint64_t off, uint64_t n) {
    rep_->stray_bytes += n;
    if (!rep_->stray.empty() && rep_->stray.back().offset + rep_->stray.back().bytes == off)
      rep_->stray.back().bytes += n;
    else
      rep_->stray.push_back({off, n});
  }
  void Damaged(uint64_t off, std::string reason, std::string key = {}) {
    rep_->damaged.push_back({off, std::move(reason), std::move(key)});
  }

  // block_ holds the non-zero block at off; sets *next to where the walk goes on.
  Status Extent(uint64_t off, uint64_t* next) {
    const uint64_t size = src_.size();
    *next = off + kBlock;
    const bool magic_ok = std::memcmp(block_.data(), kMagic, 8) == 0;
    // The header may be longer than a block (a long key): read it whole when its
    // length field is plausible, else DecodeHeader reports the bad length.
    const uint64_t hb_field = Get32(block_.data() + 12);
    const uint8_t* h = block_.data();
    size_t avail = kBlock;
    if (hb_field > kBlock && hb_field % kBlock == 0 && hb_field <= kMaxHeaderBytes &&
        hb_field <= size - off) {
      header_.resize(hb_field);
      PION_RETURN_IF_ERROR(ReadExact(src_, off, hb_field, header_.data()));
      h = header_.data();
      avail = hb_field;
    }
    uint32_t hb = 0, vcrc = 0;
    uint64_t vlen = 0;
    std::string_view key;
    std::string reason;
    if (magic_ok) {
      Status s = DecodeHeader(h, avail, &hb, &vlen, &key, &vcrc);
      if (!s.ok()) {
        Damaged(off, "header: " + std::string(s.message()));
        return Status::OK();  // the lengths are not to be trusted: go on at the next block
      }
    } else {
      // Not a header, unless only its magic was damaged: the header's CRC (which
      // covers the magic) then passes with the magic restored.
      repaired_.assign(h, h + avail);
      std::memcpy(repaired_.data(), kMagic, 8);
      if (!DecodeHeader(repaired_.data(), avail, &hb, &vlen, &key, &vcrc).ok()) {
        Stray(off, kBlock);
        return Status::OK();
      }
      key = std::string_view(reinterpret_cast<const char*>(h) + 64, key.size());
      reason = "header: bad magic";
    }
    std::string key_copy(key);
    // From here the header's CRC passed: its lengths hold.
    if (vlen > size - off - hb) {
      Damaged(off, "value runs past the end of the file", std::move(key_copy));
      *next = size;
      return Status::OK();
    }
    *next = off + (hb + vlen + kBlock - 1) / kBlock * kBlock;
    if (*next > size) *next = size;
    uint32_t crc = 0;
    buf_.resize(static_cast<size_t>(std::min<uint64_t>(kChunk, std::max<uint64_t>(vlen, 1))));
    for (uint64_t done = 0; done < vlen;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf_.size(), vlen - done));
      PION_RETURN_IF_ERROR(ReadExact(src_, off + hb + done, n, buf_.data()));
      crc = crc32c::Extend(crc, buf_.data(), n);
      done += n;
    }
    if (crc != vcrc) reason += std::string(reason.empty() ? "" : "; ") + "value checksum mismatch";
    if (!reason.empty()) {
      Damaged(off, std::move(reason), std::move(key_copy));
      return Status::OK();
    }
    rep_->extents++;
    rep_->extent_bytes += *next - off;
    rep_->value_bytes += vlen;
    return Status::OK();
  }

  const TierSource& src_;
  TierCheckReport* rep_;
  std::vector<uint8_t> block_, header_, repaired_, buf_;
};

}  // namespace

Result<size_t> MemoryTierSource::ReadAt(uint64_t off, size_t n, uint8_t* out) const {
  if (off >= n_) return size_t{0};
  const size_t take = static_cast<size_t>(std::min<uint64_t>(n, n_ - off));
  std::memcpy(out, p_ + off, take);
  return take;
}

Status CheckTier(const TierSource& src, TierCheckReport* report) {
  *report = TierCheckReport();
  return Walker(src, report).Run();
}

Status CheckTierFile(const std::string& path, TierCheckReport* report) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError(path + ": not a regular file");
  }
  FileSource src(fd, static_cast<uint64_t>(st.st_size));
  Status s = CheckTier(src, report);
  ::close(fd);
  return s;
}

}  // namespace pion::tier
