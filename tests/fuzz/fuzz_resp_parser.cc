// libFuzzer target for the RESP request parser (src/net/resp_parser.h).
// The first two input bytes choose the feeding pattern (chunk size, whether big
// arguments are read "directly", tight limits, unauthenticated mode); the rest
// is the byte stream a client sends. Checks the parser's contract: no crash,
// commands within the input, a sticky error with a "Protocol error" text, and
// the same outcome however the stream is split.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "net/resp_parser.h"

namespace {

using pion::net::BufferPool;
using pion::net::ParserLimits;
using pion::net::RespParser;

struct Result {
  std::vector<std::string> cmds;  // arguments joined with '\0' markers
  std::string error;
};

Result Run(const uint8_t* data, size_t size, size_t chunk, bool direct, const ParserLimits& lim,
           bool auth, BufferPool* pool) {
  RespParser p(pool);
  p.set_limits(lim);
  p.set_auth_required(auth);
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
      if (r == RespParser::Result::kNeedMore) break;
      if (r == RespParser::Result::kError) {
        res.error = p.error();
        PION_CHECK(res.error.rfind("ERR Protocol error: ", 0) == 0);
        // Sticky.
        PION_CHECK(p.Parse(region.data(), region.size()) == RespParser::Result::kError);
        return res;
      }
      PION_CHECK(p.command_bytes() <= region.size());
      PION_CHECK(p.args().size() <= lim.max_args);
      std::string joined;
      for (auto a : p.args()) {
        PION_CHECK(a.size() <= lim.max_bulk_len || a.size() <= 64 * 1024);
        joined.append(a);
        joined.push_back('\0');
      }
      res.cmds.push_back(std::move(joined));
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
  ParserLimits lim;
  if (mode & 1) {  // tight limits so the fuzzer reaches them
    lim.max_bulk_len = 100000;
    lim.max_args = 64;
    lim.max_query_bytes = 200000;
  }
  bool auth = mode & 2;
  bool direct = mode & 4;
  size_t chunk = 1 + chunk_sel % 64;
  if (chunk_sel >= 192) chunk = size + 1;  // whole
  Result a = Run(data, size, chunk, direct, lim, auth, &pool);
  // The same stream fed whole must give the same commands and error.
  Result b = Run(data, size, size + 1, false, lim, auth, &pool);
  PION_CHECK(a.error == b.error);
  PION_CHECK(a.cmds == b.cmds);
  return 0;
}
