// WalReader implementation: see wal_reader.h and docs/wal_format.md §5.
#include "persist/wal_reader.h"

#include <algorithm>

namespace pion::persist {

Result<std::unique_ptr<WalReader>> WalReader::Open(Env* env, const std::string& path) {
  auto f = env->NewReadableFile(path);
  if (!f.ok()) return f.status();
  auto size = (*f)->Size();
  if (!size.ok()) return size.status();
  uint8_t hdr[kWalHeaderSize];
  auto n = (*f)->ReadAt(0, kWalHeaderSize, hdr);
  if (!n.ok()) return n.status();
  WalHeader h;
  PION_RETURN_IF_ERROR(DecodeWalHeader(hdr, *n, &h));
  return std::unique_ptr<WalReader>(new WalReader(std::move(f).value(), *size, h));
}

WalReader::WalReader(std::unique_ptr<ReadableFile> f, uint64_t size, WalHeader h)
    : f_(std::move(f)), size_(size), header_(h), expect_lsn_(h.first_lsn) {}

bool WalReader::TryRecord(uint64_t off, uint64_t min_lsn, uint64_t max_lsn, WalRecord* rec,
                          std::string* why) {
  if (size_ - off < kRecordHeaderSize) {
    *why = "truncated record header";
    return false;
  }
  uint8_t hdr[kRecordHeaderSize];
  auto n = f_->ReadAt(off, kRecordHeaderSize, hdr);
  if (!n.ok() || *n != kRecordHeaderSize) {
    io_ = n.ok() ? Status::IOError("short read") : n.status();
    *why = "read error";
    return false;
  }
  uint64_t len = GetU32(hdr + 4);
  uint8_t type = hdr[8];
  uint64_t lsn = GetU64(hdr + 12);
  if (hdr[9] != 0 || hdr[10] != 0 || hdr[11] != 0) {
    *why = "reserved header bytes not zero";
    return false;
  }
  if (type < 1 || type > kMaxWalRecordType) {
    *why = "unknown record type " + std::to_string(type);
    return false;
  }
  if (len > kMaxPayload || len > size_ - off - kRecordHeaderSize) {
    *why = "record extends past the end of the file";
    return false;
  }
  if (lsn < min_lsn || lsn > max_lsn) {
    *why = "unexpected lsn " + std::to_string(lsn) + " (expected " + std::to_string(min_lsn) + ")";
    return false;
  }
  if (buf_.size() < len) buf_.resize(std::max<size_t>(len, buf_.size() * 2));
  n = f_->ReadAt(off + kRecordHeaderSize, len, buf_.data());
  if (!n.ok() || *n != len) {
    io_ = n.ok() ? Status::IOError("short read") : n.status();
    *why = "read error";
    return false;
  }
  std::span<const uint8_t> payload(buf_.data(), len);
  std::span<const uint8_t> pieces[1] = {payload};
  if (RecordCrc(header_.generation, hdr, pieces) != GetU32(hdr)) {
    *why = "checksum mismatch";
    return false;
  }
  Status v = ValidateWalPayload(static_cast<RecordType>(type), payload);
  if (!v.ok()) {
    *why = std::string(v.message());
    return false;
  }
  rec->type = static_cast<RecordType>(type);
  rec->lsn = lsn;
  rec->offset = off;
  rec->payload = payload;
  return true;
}

uint64_t WalReader::StaleRecordGeneration(uint64_t off, const uint8_t* hdr, uint64_t* budget) {
  // Generations back that are tried: the spare a compaction recycles holds the
  // generation before the previous one (docs/wal_format.md §6).
  constexpr uint64_t kStaleGenerations = 16;
  const uint64_t len = GetU32(hdr + 4);
  const uint64_t lsn = GetU64(hdr + 12);
  if (lsn == 0 || lsn >= header_.first_lsn || header_.generation < 2) return 0;
  if (len > kMaxPayload || len > size_ - off - kRecordHeaderSize || len > *budget) return 0;
  *budget -= len;
  std::vector<uint8_t> payload(len);
  auto n = f_->ReadAt(off + kRecordHeaderSize, len, payload.data());
  if (!n.ok() || *n != len) return 0;
  std::span<const uint8_t> pieces[1] = {payload};
  const uint64_t lowest =
      header_.generation > kStaleGenerations ? header_.generation - kStaleGenerations : 1;
  for (uint64_t g = header_.generation - 1; g >= lowest; --g)
    if (RecordCrc(g, hdr, pieces) == GetU32(hdr)) return g;
  return 0;
}

bool WalReader::AllZeroFrom(uint64_t off) {
  uint8_t buf[65536];
  while (off < size_) {
    auto n = f_->ReadAt(off, std::min<uint64_t>(sizeof(buf), size_ - off), buf);
    if (!n.ok() || *n == 0) return false;
    for (size_t i = 0; i < *n; ++i)
      if (buf[i] != 0) return false;
    off += *n;
  }
  return true;
}

void WalReader::Classify(const std::string& why) {
  done_ = true;
  reason_ = why;
  if (!io_.ok()) {
    end_ = WalEnd::kCorrupt;
    return;
  }
  if (pos_ >= size_ || AllZeroFrom(pos_)) {
    end_ = WalEnd::kClean;
    reason_.clear();
    return;
  }
  // A record header of zero bytes at pos_ is a hole: space an append reserved
  // whose write had not reached the disk (appends are written concurrently,
  // header last). Valid records after a hole belong to later appends that
  // finished first; none of them was acknowledged (acks only cover the
  // contiguous prefix), so a hole followed by records is a torn tail.
  bool hole = false;
  if (size_ - pos_ >= kRecordHeaderSize) {
    uint8_t h[kRecordHeaderSize];
    auto n = f_->ReadAt(pos_, kRecordHeaderSize, h);
    hole = n.ok() && *n == kRecordHeaderSize &&
           std::all_of(h, h + kRecordHeaderSize, [](uint8_t b) { return b == 0; });
  }
  // Search for any valid record after the bad one: its presence means the bad
  // bytes are not a crash artefact (unless they are a hole and the record's LSN
  // is a later one). Only headers that pass the cheap checks get their checksum
  // computed.
  // A record of an earlier generation (LSN below this file's first one, CRC
  // seeded with an older generation) is remembered: if no record of this file
  // follows, the bytes after the last record are a recycled file's old
  // contents (kStale), not the remains of an append.
  uint64_t stale_at = 0, stale_gen = 0;
  uint64_t stale_budget = 256ull << 20;  // payload bytes checked as stale candidates
  std::vector<uint8_t> win;
  const size_t kWin = 1 << 20;
  for (uint64_t base = pos_ + 1; base + kRecordHeaderSize <= size_; base += kWin) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kWin + kRecordHeaderSize, size_ - base));
    win.resize(want);
    auto n = f_->ReadAt(base, want, win.data());
    if (!n.ok()) break;
    for (size_t i = 0; i + kRecordHeaderSize <= *n && i < kWin; ++i) {
      const uint8_t* h = win.data() + i;
      if (h[8] < 1 || h[8] > kMaxWalRecordType || h[9] != 0 || h[10] != 0 || h[11] != 0) continue;
      uint64_t lsn = GetU64(h + 12);
      if (lsn < header_.first_lsn && stale_gen == 0) {
        stale_gen = StaleRecordGeneration(base + i, h, &stale_budget);
        if (stale_gen != 0) stale_at = base + i;
        continue;
      }
      if (lsn < expect_lsn_ || lsn > expect_lsn_ + (1ull << 32)) continue;
      WalRecord r;
      std::string w;
      if (TryRecord(base + i, expect_lsn_, expect_lsn_ + (1ull << 32), &r, &w)) {
        if (hole && r.lsn > expect_lsn_) {
          end_ = WalEnd::kTorn;
          reason_ =
              "hole (zero record header) of an unfinished append, records of later "
              "appends after it";
          return;
        }
        end_ = WalEnd::kCorrupt;
        resync_ = base + i;
        return;
      }
    }
  }
  if (stale_gen != 0 && !hole) {
    end_ = WalEnd::kStale;
    resync_ = stale_at;
    stale_gen_ = stale_gen;
    reason_ = "records of generation " + std::to_string(stale_gen) +
              " (this file's earlier use) from offset " + std::to_string(stale_at);
    return;
  }
  end_ = WalEnd::kTorn;
}

bool WalReader::Next(WalRecord* rec) {
  if (done_) return false;
  if (pos_ >= size_) {
    Classify("");
    return false;
  }
  std::string why;
  if (!TryRecord(pos_, expect_lsn_, expect_lsn_, rec, &why)) {
    Classify(why);
    return false;
  }
  pos_ += kRecordHeaderSize + rec->payload.size();
  ++expect_lsn_;
  return true;
}

}  // namespace pion::persist
