// The protocols a listener serves: one Listener (socket) per port and
// protocol, and every connection accepted on it speaks that protocol for its
// lifetime (net/connection.h picks its parser and reply writer from it).
#pragma once

#include <cstdint>

namespace pion::net {

enum class Protocol : uint8_t {
  kResp,      // RESP2/RESP3 (net/resp_parser.h, net/resp_writer.h)
  kFastLane,  // the binary fast lane (net/frame_parser.h, net/frame_writer.h)
};

inline const char* ProtocolName(Protocol p) { return p == Protocol::kResp ? "resp" : "fastlane"; }

}  // namespace pion::net
