// libFuzzer target for the binary fast lane's frame parser (src/net/frame_parser.h)
// and the server's mapping of a frame body to its RESP twin (src/server/fastlane.h),
// driven by the shared parser driver (parser_fuzz.h: chunk sizes, big bodies read
// "directly", tight limits, unauthenticated mode, a gate that refuses big bodies).
// Each frame is recorded as its command byte and body ("R" when rejected), must
// stay within the limits, and either maps to a bounded argument vector whose
// blobs lie inside its body, or is refused with a "malformed" text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/check.h"
#include "net/frame_parser.h"
#include "parser_fuzz.h"
#include "server/fastlane.h"

namespace {

using pion::net::FrameParser;
using pion::net::ParserLimits;

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

struct FrameTarget {
  using Parser = FrameParser;

  static void Tighten(ParserLimits* lim) {
    lim->max_frame_body = 100000;
    lim->max_query_bytes = 200000;
  }

  static std::string Record(const Parser& p, const ParserLimits& lim, bool auth) {
    if (p.rejected()) return "R";
    const pion::net::Frame& f = p.frame();
    PION_CHECK(f.body.size() <= lim.max_frame_body);
    PION_CHECK(!auth || f.body.size() <= pion::net::kFrameUnauthBodyBytes);
    PION_CHECK(pion::net::IsFrameCommand(static_cast<uint8_t>(f.command)));
    CheckMapping(f);
    std::string s(1, static_cast<char>(f.command));
    s.append(f.body);
    return s;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pion::fuzz::FuzzParser<FrameTarget>(data, size);
}
