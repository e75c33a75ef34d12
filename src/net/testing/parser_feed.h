// Test-only: feeds a request parser (RespParser, FrameParser) a byte stream the
// way a Connection does (net/request_parser.h's input model), for the parser
// unit tests and the parser fuzz targets (tests/fuzz/parser_fuzz.h).
//
// Each chunk is one "socket read": while the parser WantsDirectRead() (and
// direct reads are on) its bytes go straight into DirectTarget(), else they are
// appended to the region; after each step the region is parsed until the parser
// needs more. Every complete request is handed to `on_request(parser, region)`
// before command_bytes() are dropped from the region's front and
// ConsumeCommand().
// Header-only, no GoogleTest: the fuzz targets use it too.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/request_parser.h"

namespace pion::net::testing {

struct FeedOptions {
  ParserLimits limits;
  bool auth_required = false;
  bool direct = false;  // big arguments read straight into DirectTarget()
  BufferGate* gate = nullptr;
};

struct FeedResult {
  std::string error;     // the parser's error() after kError, "" if none
  bool complete = true;  // false if the input ended inside a request
  std::string region;    // the unconsumed input (after kError: from the bad request)
};

// `chunks`: a container of std::string or std::string_view. `out` (a
// FeedResult, or a test's outcome type derived from it) gets the error, the
// completeness and the region.
template <class Parser, class Chunks, class OnRequest>
void FeedParser(Parser& p, const Chunks& chunks, const FeedOptions& opt, FeedResult* result,
                OnRequest&& on_request) {
  p.set_limits(opt.limits);
  p.set_auth_required(opt.auth_required);
  p.set_gate(opt.gate);
  FeedResult& out = *result;
  std::string& region = out.region;
  auto drain = [&]() -> bool {
    while (true) {
      if (opt.direct && p.WantsDirectRead()) return true;
      auto r = p.Parse(region.data(), region.size());
      if (r == RequestParser::Result::kNeedMore) return true;
      if (r == RequestParser::Result::kError) {
        out.error = p.error();
        return false;
      }
      on_request(p, std::as_const(region));
      region.erase(0, p.command_bytes());
      p.ConsumeCommand();
    }
  };
  for (std::string_view c : chunks) {
    size_t used = 0;
    while (used < c.size()) {
      if (opt.direct && p.WantsDirectRead()) {
        auto t = p.DirectTarget();
        size_t n = std::min(t.size(), c.size() - used);
        std::memcpy(t.data(), c.data() + used, n);
        p.DirectFilled(n);
        used += n;
      } else {
        region.append(c.substr(used));
        used = c.size();
      }
      if (!drain()) return;
    }
  }
  out.complete = region.empty() && !p.WantsDirectRead();
}

// Feeds `in` whole, then split in two at every byte boundary, then one byte at
// a time: `feed(chunks)` returns an outcome, `expect_same(got, whole, where)`
// checks that each one agrees with the whole one. Returns the whole outcome.
template <class Feed, class ExpectSame>
auto FeedAllSplits(const std::string& in, Feed&& feed, ExpectSame&& expect_same) {
  auto whole = feed(std::vector<std::string>{in});
  for (size_t cut = 0; cut <= in.size(); ++cut)
    expect_same(feed(std::vector<std::string>{in.substr(0, cut), in.substr(cut)}), whole,
                "cut at " + std::to_string(cut));
  std::vector<std::string> bytes;
  for (char c : in) bytes.emplace_back(1, c);
  expect_same(feed(bytes), whole, std::string("byte by byte"));
  return whole;
}

}  // namespace pion::net::testing
