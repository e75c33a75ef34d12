// libFuzzer target for the RESP request parser (src/net/resp_parser.h), driven
// by the shared parser driver (parser_fuzz.h: chunk sizes, direct reads of big
// arguments, tight limits, unauthenticated mode, a refusing gate). Each
// command is recorded as its arguments joined with '\0' markers ("R" when
// rejected), and must stay within the limits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/check.h"
#include "net/resp_parser.h"
#include "parser_fuzz.h"

namespace {

using pion::net::ParserLimits;

struct RespTarget {
  using Parser = pion::net::RespParser;

  static void Tighten(ParserLimits* lim) {
    lim->max_bulk_len = 100000;
    lim->max_args = 64;
    lim->max_query_bytes = 200000;
  }

  static std::string Record(const Parser& p, const ParserLimits& lim, bool /*auth*/) {
    if (p.rejected()) {
      PION_CHECK(p.args().empty());
      return "R";
    }
    PION_CHECK(p.args().size() <= lim.max_args);
    std::string joined;
    for (auto a : p.args()) {
      PION_CHECK(a.size() <= lim.max_bulk_len || a.size() <= 64 * 1024);
      joined.append(a);
      joined.push_back('\0');
    }
    return joined;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pion::fuzz::FuzzParser<RespTarget>(data, size);
}
