#include "net/frame_writer.h"

#include <charconv>

#include "base/check.h"
#include "net/resp_errors.h"
#include "net/resp_writer.h"

namespace pion::net {

FrameStatus FrameWriter::ErrorStatus(std::string_view text) {
  std::string_view word = text.substr(0, text.find(' '));
  return word == kColdMissCodeWord ? FrameStatus::kColdMiss : FrameStatus::kError;
}

bool FrameWriter::Begin(FrameStatus status, uint64_t len) {
  if (agg_header_ != nullptr) {
    agg_bytes_ += len;
    return true;
  }
  if (len > UINT32_MAX) {
    Error(kErrFrameReplyTooLong);
    return false;
  }
  EncodeFrameHeader(out_->AppendSpace(kFrameHeaderBytes), status, static_cast<uint32_t>(len));
  return true;
}

void FrameWriter::EndElement() {
  if (agg_header_ == nullptr) return;
  if (--agg_left_ > 0) return;
  // Replies are bounded by the lane's limits (fastlane-max-frame-len), far
  // below what a u32 length can carry.
  PION_CHECK(agg_bytes_ <= UINT32_MAX);
  EncodeFrameHeader(agg_header_, FrameStatus::kOk, static_cast<uint32_t>(agg_bytes_));
  agg_header_ = nullptr;
  agg_bytes_ = 0;
}

void FrameWriter::Text(std::string_view s) {
  if (!Begin(FrameStatus::kOk, s.size())) return;
  out_->Append(s);
  EndElement();
}

void FrameWriter::SimpleString(std::string_view s) {
  // A status reply (+OK, +PONG) is the OK status itself; inside an aggregate
  // its text is the element.
  if (agg_header_ != nullptr) {
    Text(s);
    return;
  }
  Begin(FrameStatus::kOk, 0);
}

void FrameWriter::Error(std::string_view text) {
  NoteError(text);
  if (agg_header_ != nullptr) {
    Text(text);
    return;
  }
  Begin(ErrorStatus(text), text.size());
  out_->Append(text);
}

void FrameWriter::Integer(int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  Text(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

void FrameWriter::Double(double v) { Text(FormatDouble(v)); }

void FrameWriter::Null() {
  if (agg_header_ != nullptr) {
    EndElement();
    return;
  }
  Begin(FrameStatus::kMiss, 0);
}

void FrameWriter::ArrayHeader(size_t n) {
  if (agg_header_ != nullptr) {
    agg_left_ += n;  // this element is replaced by its n elements
    EndElement();
    return;
  }
  agg_header_ = out_->AppendSpace(kFrameHeaderBytes);
  agg_left_ = n + 1;
  agg_bytes_ = 0;
  EndElement();  // an empty aggregate is complete at once
}

void FrameWriter::Bulk(std::string_view s) {
  if (s.size() >= kCopyThreshold) {
    BulkByCopy(*this, s);
    return;
  }
  Text(s);
}

uint8_t* FrameWriter::BulkReserve(size_t len) {
  // Bounded like EndElement's aggregates (a top-level reply over 4 GiB cannot
  // be produced from a frame within fastlane-max-frame-len).
  PION_CHECK(len <= UINT32_MAX);
  Begin(FrameStatus::kOk, len);
  char* p = out_->AppendOwned(len);
  EndElement();
  return reinterpret_cast<uint8_t*>(p);
}

uint8_t* FrameWriter::TryBulkReserve(size_t len) {
  if (agg_header_ == nullptr && len > UINT32_MAX) return nullptr;
  // Allocated before the header is queued, so a failure leaves no trace.
  IoBuf buf = out_->TryAllocate(len);
  if (buf.empty()) return nullptr;
  Begin(FrameStatus::kOk, len);
  char* p = out_->AppendOwned(std::move(buf), len);
  EndElement();
  return reinterpret_cast<uint8_t*>(p);
}

void FrameWriter::BulkPinned(size_t len, std::span<const iovec> parts,
                             std::shared_ptr<const void> pin, std::span<const PinnedBlock> blocks) {
  if (!Begin(FrameStatus::kOk, len)) return;
  out_->AppendExternal(parts, std::move(pin), blocks);
  EndElement();
}

void FrameWriter::BulkExternal(size_t len, std::span<const iovec> parts,
                               std::shared_ptr<const void> pin) {
  if (!Begin(FrameStatus::kOk, len)) return;
  out_->AppendExternal(parts, std::move(pin));
  EndElement();
}

}  // namespace pion::net
