// Why a quant call failed (carried by a Status next to its code, base/status.h).
// quant words nothing for clients: the command layer's error table
// (src/kvproto/errors.cc) does; the Status message is for logs.
#pragma once

#include <cstdint>
#include <string_view>

namespace pion::quant {

enum class Reason : uint16_t {
  kNone = 0,
  kNonFinite,  // inf or NaN given to a format that cannot hold it: fields the row
};

constexpr std::string_view ReasonDomain(Reason) { return "quant"; }

}  // namespace pion::quant
