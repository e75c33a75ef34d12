// libFuzzer target for the binary fast lane's frame parser (src/net/frame_parser.h)
// and the server's mapping of a frame body to its RESP twin (src/server/fastlane.h).
// The first two input bytes choose the feeding pattern (chunk size, big bodies read
// "directly", tight limits, unauthenticated mode, a gate that refuses big bodies);
// the rest is the byte stream a client sends. Checks the parser's contract: no
// crash, frames within the input and the limits, a sticky error with a "Protocol
// error" text, the same outcome however the stream is split; and that every frame
// either maps to a bounded argument vector whose blobs lie inside its body, or is
// refused with a "malformed" text.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "net/frame_parser.h"
#include "server/fastlane.h"

namespace {

using pion::net::BufferGate;
using pion::net::BufferPool;
using pion::net::FrameParser;
using pion::net::ParserLimits;
using pion::net::RequestParser;

class DenyGate : public BufferGate {
 public:
  bool Reserve(size_t) override { return false; }
};

struct Result {
  std::vector<std::string> frames;  // command byte + body, or "R" for a rejected frame
  std::string error;
};

void CheckMapping(const pion::net::Frame& f) {
  pion::server::LaneRequest req;
  std::string err;
  if (!pion::server::FrameToRequest(f, &req, &err)) {
    PION_CHECK(err.rfind("ERR Protocol error: malformed fast-lane ", 0) == 0);
    return;
  }
  PION_CHECK(req.argc >= 1 && req.argc <= pion::server::LaneRequest::kMaxArgs);
  const char* lo = f.body.data();
  const char* hi = lo + f.body.size();
  for (size_t i = 1; i < req.argc; ++i) {
    std::string_view a = req.argv[i];
    bool in_body = a.empty() || (a.data() >= lo && a.data() + a.size() <= hi);
    bool in_numbers = a.data() >= req.numbers[0].data() &&
                      a.data() + a.size() <= req.numbers.back().data() + req.numbers.back().size();
    PION_CHECK(in_body || in_numbers || a == "1");
  }
}

Result Run(const uint8_t* data, size_t size, size_t chunk, bool direct, const ParserLimits& lim,
           bool auth, BufferGate* gate, BufferPool* pool) {
  FrameParser p(pool);
  p.set_limits(lim);
  p.set_auth_required(auth);
  p.set_gate(gate);
  Result res;
  std::string region;
  size_t used = 0;
  while (used < size || (!region.empty() && res.error.empty())) {
    if (used < size) {
      if (direct && p.WantsDirectRead()) {
        auto t = p.DirectTarget();
        size_t n = std::min<size_t>({t.size(), chunk, size - used});
        std::memcpy(t.data(), data + used, n);
        p.DirectFilled(n);
        used += n;
      } else {
        size_t n = std::min(chunk, size - used);
        region.append(reinterpret_cast<const char*>(data + used), n);
        used += n;
      }
    }
    bool progressed = false;
    while (true) {
      if (direct && p.WantsDirectRead()) break;
      auto r = p.Parse(region.data(), region.size());
      if (r == RequestParser::Result::kNeedMore) break;
      if (r == RequestParser::Result::kError) {
        res.error = p.error();
        PION_CHECK(res.error.rfind("ERR Protocol error: ", 0) == 0);
        PION_CHECK(p.Parse(region.data(), region.size()) == RequestParser::Result::kError);
        return res;
      }
      PION_CHECK(p.command_bytes() <= region.size());
      if (p.rejected()) {
        res.frames.push_back("R");
      } else {
        const pion::net::Frame& f = p.frame();
        PION_CHECK(f.body.size() <= lim.max_frame_body);
        PION_CHECK(!auth || f.body.size() <= pion::net::kFrameUnauthBodyBytes);
        PION_CHECK(pion::net::IsFrameCommand(static_cast<uint8_t>(f.command)));
        CheckMapping(f);
        std::string s(1, static_cast<char>(f.command));
        s.append(f.body);
        res.frames.push_back(std::move(s));
      }
      region.erase(0, p.command_bytes());
      p.ConsumeCommand();
      progressed = true;
    }
    if (used >= size && !progressed) break;
  }
  return res;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint8_t mode = data[0], chunk_sel = data[1];
  data += 2;
  size -= 2;
  static BufferPool pool(8 << 20);
  static DenyGate deny;
  ParserLimits lim;
  if (mode & 1) {  // tight limits so the fuzzer reaches them
    lim.max_frame_body = 100000;
    lim.max_query_bytes = 200000;
  }
  bool auth = mode & 2;
  bool direct = mode & 4;
  BufferGate* gate = (mode & 8) ? &deny : nullptr;
  size_t chunk = 1 + chunk_sel % 64;
  if (chunk_sel >= 192) chunk = size + 1;  // whole
  Result a = Run(data, size, chunk, direct, lim, auth, gate, &pool);
  // The same stream fed whole must give the same frames and error.
  Result b = Run(data, size, size + 1, false, lim, auth, gate, &pool);
  PION_CHECK(a.error == b.error);
  PION_CHECK(a.frames == b.frames);
  return 0;
}
