// Every client-facing error text of the server, and the one table that maps a
// Status to a RESP error line. A message that does not start with a code word
// gets "ERR " (as Redis does). Code words: ERR, NOPROTO, NOAUTH, WRONGPASS, OOM,
// LOADING, COLDMISS (docs/protocol.md).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "net/resp_errors.h"

namespace pion::server {

inline constexpr std::string_view kErrNotEnabled = "ERR V-store not enabled (use --kvcache)";
inline constexpr std::string_view kErrNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kErrSessionNotFound = "ERR session not found";
inline constexpr std::string_view kErrLoading = "LOADING pion is loading the dataset in memory";
inline constexpr std::string_view kErrNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kErrNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kErrNoPersistence = "ERR persistence is not enabled";

// "-ERR wrong number of arguments for '<cmd>' command" (without the '-').
std::string WrongArity(std::string_view cmd);
// The transport's texts and the Status -> error line table (src/net/resp_errors.h).
using net::kErrClientMemory;
using net::kErrNoMemory;
using net::kErrOom;
using net::StatusToError;

}  // namespace pion::server
