// The error lines the transport itself sends (no command has run yet, or the
// reply cannot be carried), as constants only: net renders no Status (the
// command layer's table does, src/kvproto/errors.h) and this header has no
// source file, so the protocol library (src/kvproto) and the Redis module name
// kErrClientMemory / kErrNoMemory from here without linking any net code.
#pragma once

#include <string_view>

namespace pion::net {

// A command whose large argument or reply would take client memory past
// maxmemory-clients, or that the allocator refused (the client stays connected).
inline constexpr std::string_view kErrClientMemory =
    "OOM command not allowed when client buffers exceed 'maxmemory-clients' (retry later)";
inline constexpr std::string_view kErrNoMemory =
    "OOM command not allowed: out of memory for an argument or reply of this size";

// The fast lane's protocol errors (net/frame_parser.h; the connection closes
// after the ERROR frame). The unknown-command and too-long texts get details.
inline constexpr std::string_view kErrFrameBadMagic =
    "ERR Protocol error: bad fast-lane frame magic (expected 0xCA5E)";
inline constexpr std::string_view kErrFrameUnknownCommand =
    "ERR Protocol error: unknown fast-lane command";
inline constexpr std::string_view kErrFrameTooLong =
    "ERR Protocol error: fast-lane frame body too long";
inline constexpr std::string_view kErrFrameUnauthenticated =
    "ERR Protocol error: unauthenticated fast-lane frame body (at most 16384 bytes before AUTH)";
inline constexpr std::string_view kErrQueryBufferLimit =
    "ERR Protocol error: client query buffer limit exceeded";
// The RESP parser's errors: this prefix, then what was wrong (net/resp_parser.cc).
inline constexpr std::string_view kErrProtocolPrefix = "ERR Protocol error: ";
// A DeferredReply destroyed without a reply (a bug: logged by the client as this).
inline constexpr std::string_view kErrDeferredAbandoned =
    "ERR internal error: deferred reply abandoned";
// A reply that a response frame (u32 body length) cannot carry.
inline constexpr std::string_view kErrFrameReplyTooLong =
    "ERR reply too large for a fast-lane frame";
// The error code word that the lane answers with status COLDMISS (3) instead of
// ERROR (the code word, never the rest of the text, is looked at).
inline constexpr std::string_view kColdMissCodeWord = "COLDMISS";

}  // namespace pion::net
