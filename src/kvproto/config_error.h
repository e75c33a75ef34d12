// Why a CONFIG SET request was refused: the value the config parser
// (src/server/config.h) returns and the error table (kvproto/errors.h,
// ConfigSetErrorText) words. It lives here, below the server, so that the table
// names it without depending on the server's config.
#pragma once

#include <cstdint>
#include <string>

namespace pion::server {

struct ConfigSetError {
  enum Kind : uint8_t { kNone, kUnknown, kDuplicate, kImmutable, kInvalid };
  Kind kind = kNone;
  std::string name;    // the option as the client spelled it
  std::string detail;  // kInvalid: the parser's message
  bool ok() const { return kind == kNone; }
};

}  // namespace pion::server
