#include "server/fastlane.h"

#include <charconv>
#include <cstdint>

#include "kvproto/errors.h"

namespace pion::server {

// The lane answers COLDMISS (status 3) for the code word the commands use.
static_assert(kErrCodeColdMiss == net::kColdMissCodeWord);
static_assert(kErrColdMiss.substr(0, kErrCodeColdMiss.size()) == kErrCodeColdMiss);

namespace {

// Reads the body's little-endian fields in order, checking every length.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : body_(body) {}

  bool U16(uint32_t* v) {
    if (left() < 2) return false;
    *v = Byte(0) | Byte(1) << 8;
    pos_ += 2;
    return true;
  }
  bool U32(uint32_t* v) {
    if (left() < 4) return false;
    *v = Byte(0) | Byte(1) << 8 | Byte(2) << 16 | Byte(3) << 24;
    pos_ += 4;
    return true;
  }
  // `n` bytes (n computed in 128 bits by the caller, so no product wraps).
  bool Bytes(unsigned __int128 n, std::string_view* out) {
    if (n > left()) return false;
    *out = body_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }
  size_t left() const { return body_.size() - pos_; }

 private:
  uint32_t Byte(size_t i) const { return static_cast<unsigned char>(body_[pos_ + i]); }

  std::string_view body_;
  size_t pos_ = 0;
};

void Add(LaneRequest* r, std::string_view a) { r->argv[r->argc++] = a; }

void AddNumber(LaneRequest* r, int64_t v) {
  auto& buf = r->numbers[r->used_numbers++];
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  Add(r, std::string_view(buf.data(), static_cast<size_t>(res.ptr - buf.data())));
}

// The optional trailing fa_window: nothing or exactly 4 bytes.
bool AddWindow(BodyReader* in, LaneRequest* r) {
  if (in->left() == 0) return true;
  uint32_t w;
  if (in->left() != 4 || !in->U32(&w)) return false;
  AddNumber(r, static_cast<int32_t>(w));
  return true;
}

bool QueryFused(std::string_view body, LaneRequest* r, std::string* error) {
  constexpr std::string_view kName = "QUERY_FUSED";
  BodyReader in(body);
  uint32_t sid_len, layer, hq, d, hkv, m, s_suf;
  std::string_view sid, q, k, v, head_map;
  if (!in.U16(&sid_len) || !in.Bytes(sid_len, &sid) || !in.U16(&layer) || !in.U16(&hq) ||
      !in.U16(&d) || !in.U16(&hkv) || !in.U32(&m) || !in.U32(&s_suf)) {
    *error = FrameBodyError(kName, "shorter than its fixed fields");
    return false;
  }
  using U128 = unsigned __int128;
  U128 q_bytes = U128(hq) * m * d * 4;
  U128 kv_bytes = U128(hkv) * s_suf * d * 4;
  if (!in.Bytes(q_bytes, &q) || !in.Bytes(kv_bytes, &k) || !in.Bytes(kv_bytes, &v) ||
      !in.Bytes(hq, &head_map)) {
    *error = FrameBodyError(kName, "shorter than H_q*M*D*4 + 2*H_kv*S_suf*D*4 + H_q bytes");
    return false;
  }
  Add(r, "ATTEND.PREFIX.QUERY_FUSED");
  Add(r, sid);
  AddNumber(r, layer);
  AddNumber(r, hq);
  AddNumber(r, d);
  AddNumber(r, s_suf);
  AddNumber(r, hkv);
  Add(r, q);
  Add(r, k);
  Add(r, v);
  Add(r, head_map);
  if (!AddWindow(&in, r)) {
    *error = FrameBodyError(kName, "bytes after head_map other than a u32 fa_window");
    return false;
  }
  return true;
}

bool Query(std::string_view body, LaneRequest* r, std::string* error) {
  constexpr std::string_view kName = "QUERY";
  BodyReader in(body);
  uint32_t sid_len, layer, h, d, m;
  std::string_view sid, q;
  if (!in.U16(&sid_len) || !in.Bytes(sid_len, &sid) || !in.U16(&layer) || !in.U16(&h) ||
      !in.U16(&d) || !in.U32(&m)) {
    *error = FrameBodyError(kName, "shorter than its fixed fields");
    return false;
  }
  if (!in.Bytes((unsigned __int128)h * m * d * 4, &q)) {
    *error = FrameBodyError(kName, "shorter than H*M*D*4 bytes of Q");
    return false;
  }
  Add(r, "ATTEND.PREFIX.QUERY");
  Add(r, sid);
  AddNumber(r, layer);
  AddNumber(r, h);
  AddNumber(r, d);
  Add(r, "1");  // top_k: required > 0, ignored (docs/protocol.md "ATTEND.PREFIX")
  Add(r, q);
  if (!AddWindow(&in, r)) {
    *error = FrameBodyError(kName, "bytes after Q other than a u32 fa_window");
    return false;
  }
  return true;
}

}  // namespace

bool FrameToRequest(const net::Frame& frame, LaneRequest* out, std::string* error) {
  std::string_view body = frame.body;
  switch (frame.command) {
    case net::FrameCommand::kPing:
      Add(out, "PING");
      if (!body.empty()) Add(out, body);
      return true;
    case net::FrameCommand::kAuth: {
      Add(out, "AUTH");
      size_t nul = body.find('\0');
      if (nul != std::string_view::npos) {
        Add(out, body.substr(0, nul));
        body.remove_prefix(nul + 1);
      }
      Add(out, body);
      return true;
    }
    case net::FrameCommand::kQueryFused:
      return QueryFused(body, out, error);
    case net::FrameCommand::kQuery:
      return Query(body, out, error);
  }
  *error = FrameBodyError("?", "unknown command");
  return false;
}

}  // namespace pion::server
