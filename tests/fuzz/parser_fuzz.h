// The libFuzzer driver both request-parser targets share (fuzz_resp_parser,
// fuzz_frame_parser), parameterised by the parser. The first two input bytes
// choose the feeding pattern:
//
//   mode bit 0  tight limits (Target::Tighten) so the fuzzer reaches them
//   mode bit 1  unauthenticated (the tighter header limits)
//   mode bit 2  big arguments read "directly" (DirectTarget / DirectFilled)
//   mode bit 3  a gate that refuses every big-argument buffer (rejections)
//   chunk_sel   the chunk size, 1..64 bytes, or the whole stream (>= 192)
//
// the rest is the byte stream a client sends, fed as a connection does
// (src/net/testing/parser_feed.h). Checks each parser's contract: no crash, a
// sticky error with a "Protocol error" text, requests within the region (and
// whatever Target::Record checks of each one), and the same outcome when the
// stream is fed whole.
//
// A Target supplies: `using Parser`, `static void Tighten(ParserLimits*)`, and
// `static std::string Record(const Parser&, const ParserLimits&, bool auth)`,
// the request's outcome as a string (called for rejected requests too).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "net/buffer.h"
#include "net/request_parser.h"
#include "net/testing/parser_feed.h"

namespace pion::fuzz {

class DenyGate : public net::BufferGate {
 public:
  bool Reserve(size_t) override { return false; }
};

struct ParserRun : net::testing::FeedResult {  // + error, region
  std::vector<std::string> requests;           // Target::Record of each, in order
};

template <class Target>
ParserRun RunParser(const uint8_t* data, size_t size, size_t chunk,
                    const net::testing::FeedOptions& opt, net::BufferPool* pool) {
  typename Target::Parser p(pool);
  std::vector<std::string_view> chunks;
  for (size_t off = 0; off < size; off += chunk)
    chunks.emplace_back(reinterpret_cast<const char*>(data) + off, std::min(chunk, size - off));
  ParserRun run;
  net::testing::FeedParser(
      p, chunks, opt, &run, [&](const typename Target::Parser& parser, const std::string& region) {
        PION_CHECK(parser.command_bytes() <= region.size());
        run.requests.push_back(Target::Record(parser, opt.limits, opt.auth_required));
      });
  if (!run.error.empty()) {
    PION_CHECK(run.error.rfind("ERR Protocol error: ", 0) == 0);
    // Sticky.
    PION_CHECK(p.Parse(run.region.data(), run.region.size()) == net::RequestParser::Result::kError);
  }
  return run;
}

template <class Target>
int FuzzParser(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint8_t mode = data[0], chunk_sel = data[1];
  data += 2;
  size -= 2;
  static net::BufferPool pool(8 << 20);
  static DenyGate deny;
  net::testing::FeedOptions opt;
  if (mode & 1) Target::Tighten(&opt.limits);
  opt.auth_required = mode & 2;
  opt.direct = mode & 4;
  opt.gate = (mode & 8) ? &deny : nullptr;
  size_t chunk = 1 + chunk_sel % 64;
  if (chunk_sel >= 192) chunk = size + 1;  // whole
  ParserRun a = RunParser<Target>(data, size, chunk, opt, &pool);
  // The same stream fed whole must give the same requests and error.
  net::testing::FeedOptions whole = opt;
  whole.direct = false;
  ParserRun b = RunParser<Target>(data, size, size + 1, whole, &pool);
  PION_CHECK(a.error == b.error);
  PION_CHECK(a.requests == b.requests);
  return 0;
}

}  // namespace pion::fuzz
