// Every client-facing error text of the server, and the one table that maps a
// Status to a RESP error line. A message that does not start with a code word
// gets "ERR " (as Redis does). Code words: ERR, NOPROTO, NOAUTH, WRONGPASS, OOM,
// LOADING, COLDMISS (docs/protocol.md).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace pion::server {

inline constexpr std::string_view kErrNotEnabled = "ERR V-store not enabled (use --kvcache)";
inline constexpr std::string_view kErrNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kErrSessionNotFound = "ERR session not found";
inline constexpr std::string_view kErrOom =
    "OOM command not allowed when used memory > 'maxmemory'.";
// A command whose large argument or reply would take client memory past
// maxmemory-clients, or that the allocator refused (the client stays connected).
inline constexpr std::string_view kErrClientMemory =
    "OOM command not allowed when client buffers exceed 'maxmemory-clients' (retry later)";
inline constexpr std::string_view kErrNoMemory =
    "OOM command not allowed: out of memory for an argument or reply of this size";
inline constexpr std::string_view kErrLoading = "LOADING pion is loading the dataset in memory";
inline constexpr std::string_view kErrNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kErrNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kErrNoPersistence = "ERR persistence is not enabled";

// "-ERR wrong number of arguments for '<cmd>' command" (without the '-').
std::string WrongArity(std::string_view cmd);
// The RESP error line (without '-' and CRLF) for a non-OK status.
std::string StatusToError(const Status& st);

}  // namespace pion::server
