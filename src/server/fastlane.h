// The fast lane's frames as the requests of their RESP twins (docs/protocol.md
// "Binary fast lane"). The transport (net/frame_parser.h) delivers a frame's
// command code and body; this file reads the body's fields and builds the
// argument vector the RESP client would have sent, so the frame goes through
// the same admission (auth, --kvcache, loading), the same handler, limits and
// deferred replies as the RESP command:
//
//   0xFF PING         body                      -> PING [body]
//   0x37 AUTH         password | user\0password -> AUTH [user] password
//   0x24 QUERY_FUSED  [u16 sid_len][sid][u16 layer][u16 H_q][u16 D][u16 H_kv]
//                     [u32 M][u32 S_suf][Q][K_suf][V_suf][head_map][opt u32 fa_window]
//                     -> ATTEND.PREFIX.QUERY_FUSED sid layer H_q D S_suf H_kv Q K_suf V_suf
//                        head_map [fa_window]
//   0x25 QUERY        [u16 sid_len][sid][u16 layer][u16 H][u16 D][u32 M][Q][opt u32 fa_window]
//                     -> ATTEND.PREFIX.QUERY sid layer H D 1 Q [fa_window]
//
// Integers are little-endian; blob sizes follow from the shape fields (Q is
// H·M·D f32, K_suf and V_suf H_kv·S_suf·D f32 each, head_map H_q bytes) and
// must add up to the body exactly, with nothing or a 4-byte fa_window after
// them. fa_window is read as a two's-complement i32 (0xFFFFFFFF = -1). The
// blobs are views into the frame body: nothing is copied. Values the shape
// fields allow but the command refuses (H_q = 0, M = 0, H_q % H_kv != 0) are
// the command's errors, as over RESP.
//
// Thread-safety: pure functions; called on worker threads.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "net/frame_parser.h"

namespace pion::server {

// A frame's RESP twin: the arguments and the text of the numbers among them.
struct LaneRequest {
  static constexpr size_t kMaxArgs = 12;
  std::array<std::string_view, kMaxArgs> argv;
  size_t argc = 0;
  std::array<std::array<char, 24>, 6> numbers{};
  size_t used_numbers = 0;

  std::span<const std::string_view> args() const { return {argv.data(), argc}; }
};

// Fills `out` with the twin of `frame`. False, with the error reply in *error,
// when the body does not follow its command's layout (a malformed frame: the
// caller answers ERROR and closes the connection).
bool FrameToRequest(const net::Frame& frame, LaneRequest* out, std::string* error);

}  // namespace pion::server
