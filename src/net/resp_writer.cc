#include "net/resp_writer.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "net/resp_errors.h"

namespace pion::net {

namespace {

// Writes "<type><n>\r\n" into `p`; returns the length (at most 23).
size_t EncodeHeader(char* p, char type, uint64_t n) {
  p[0] = type;
  auto r = std::to_chars(p + 1, p + 22, n);
  r.ptr[0] = '\r';
  r.ptr[1] = '\n';
  return static_cast<size_t>(r.ptr + 2 - p);
}

// Error and simple strings are single lines: CR and LF become spaces (Redis).
void AppendLine(OutputQueue* out, char type, std::string_view s) {
  char* p = out->AppendSpace(s.size() + 3);
  p[0] = type;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    p[i + 1] = (c == '\r' || c == '\n') ? ' ' : c;
  }
  p[s.size() + 1] = '\r';
  p[s.size() + 2] = '\n';
}

}  // namespace

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

void RespWriter::Header(char type, uint64_t n) {
  char buf[24];
  out_->Append(buf, EncodeHeader(buf, type, n));
}

void RespWriter::SimpleString(std::string_view s) { AppendLine(out_, '+', s); }

void RespWriter::Error(std::string_view text) {
  NoteError(text);
  AppendLine(out_, '-', text);
}

void RespWriter::Integer(int64_t v) {
  char buf[24];
  buf[0] = ':';
  auto r = std::to_chars(buf + 1, buf + 22, v);
  r.ptr[0] = '\r';
  r.ptr[1] = '\n';
  out_->Append(buf, static_cast<size_t>(r.ptr + 2 - buf));
}

void BulkByCopy(ReplyBuilder& reply, std::string_view s) {
  uint8_t* p = reply.TryBulkReserve(s.size());
  if (p == nullptr)
    reply.Error(kErrNoMemory);
  else
    std::memcpy(p, s.data(), s.size());
}

void RespWriter::Bulk(std::string_view s) {
  if (s.size() >= kCopyThreshold) {
    BulkByCopy(*this, s);
    return;
  }
  char hdr[24];
  size_t h = EncodeHeader(hdr, '$', s.size());
  char* p = out_->AppendSpace(h + s.size() + 2);
  std::memcpy(p, hdr, h);
  if (!s.empty()) std::memcpy(p + h, s.data(), s.size());  // an empty view may hold nullptr
  p[h + s.size()] = '\r';
  p[h + s.size() + 1] = '\n';
}

void RespWriter::Null() { out_->Append(proto_ == 3 ? std::string_view("_\r\n") : "$-1\r\n"); }

void RespWriter::NullArray() { out_->Append(proto_ == 3 ? std::string_view("_\r\n") : "*-1\r\n"); }

void RespWriter::ArrayHeader(size_t n) { Header('*', n); }

void RespWriter::MapHeader(size_t pairs) {
  if (proto_ == 3)
    Header('%', pairs);
  else
    Header('*', 2 * static_cast<uint64_t>(pairs));
}

void RespWriter::SetHeader(size_t n) { Header(proto_ == 3 ? '~' : '*', n); }

void RespWriter::Double(double v) {
  std::string s = FormatDouble(v);
  if (proto_ == 3) {
    out_->Append(",");
    out_->Append(s);
    out_->Append("\r\n");
  } else {
    Bulk(s);
  }
}

void RespWriter::Boolean(bool v) {
  if (proto_ == 3)
    out_->Append(v ? std::string_view("#t\r\n") : "#f\r\n");
  else
    out_->Append(v ? std::string_view(":1\r\n") : ":0\r\n");
}

void RespWriter::Verbatim(std::string_view body) {
  if (proto_ != 3) {
    Bulk(body);
    return;
  }
  Header('=', body.size() + 4);
  out_->Append("txt:");
  if (body.size() >= kCopyThreshold)
    std::memcpy(out_->AppendOwned(body.size()), body.data(), body.size());
  else
    out_->Append(body);
  out_->Append("\r\n");
}

// A small body goes into the arena with its header and CRLF (one append, no
// buffer of its own: an owned segment for MEMBERSHIP's 1-byte bitmap cost ~700
// instructions); from kCopyThreshold up it gets its own exactly-sized buffer.
uint8_t* RespWriter::SmallBulkReserve(size_t len) {
  char hdr[24];
  size_t h = EncodeHeader(hdr, '$', len);
  char* p = out_->AppendSpace(h + len + 2);
  std::memcpy(p, hdr, h);
  p[h + len] = '\r';
  p[h + len + 1] = '\n';
  return reinterpret_cast<uint8_t*>(p + h);
}

uint8_t* RespWriter::BulkReserve(size_t len) {
  if (len < kCopyThreshold) return SmallBulkReserve(len);
  Header('$', len);
  char* p = out_->AppendOwned(len);
  out_->Append("\r\n");
  return reinterpret_cast<uint8_t*>(p);
}

uint8_t* RespWriter::TryBulkReserve(size_t len) {
  if (len < kCopyThreshold) return SmallBulkReserve(len);
  // Allocated before the header is queued, so a failure leaves no trace.
  IoBuf buf = out_->TryAllocate(len);
  if (buf.empty()) return nullptr;
  Header('$', len);
  char* p = out_->AppendOwned(std::move(buf), len);
  out_->Append("\r\n");
  return reinterpret_cast<uint8_t*>(p);
}

void RespWriter::BulkPinned(size_t len, std::span<const iovec> parts,
                            std::shared_ptr<const void> pin, std::span<const PinnedBlock> blocks) {
  Header('$', len);
  out_->AppendExternal(parts, std::move(pin), blocks);
  out_->Append("\r\n");
}

void RespWriter::BulkExternal(size_t len, std::span<const iovec> parts,
                              std::shared_ptr<const void> pin) {
  Header('$', len);
  out_->AppendExternal(parts, std::move(pin));
  out_->Append("\r\n");
}

}  // namespace pion::net
