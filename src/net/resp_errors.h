// The error lines the transport itself sends, and the rendering of a Status as
// a RESP error line (the code word chosen by Status code, never by matching the
// message). A message that does not start with a code word gets "ERR " (as
// Redis does). The command layer's own texts are in src/server/errors.h, which
// re-exports these.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace pion::net {

inline constexpr std::string_view kErrOom =
    "OOM command not allowed when used memory > 'maxmemory'.";
// A string command on a namespace key or the reverse (Code::kWrongType), as Redis words it.
inline constexpr std::string_view kErrWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
// A command whose large argument or reply would take client memory past
// maxmemory-clients, or that the allocator refused (the client stays connected).
inline constexpr std::string_view kErrClientMemory =
    "OOM command not allowed when client buffers exceed 'maxmemory-clients' (retry later)";
inline constexpr std::string_view kErrNoMemory =
    "OOM command not allowed: out of memory for an argument or reply of this size";

// The RESP error line (without '-' and CRLF) for a non-OK status:
// kOutOfBudget -> OOM (kErrOom when the message is empty), kLoading -> LOADING,
// kWrongType -> kErrWrongType,
// every other code -> ERR.
std::string StatusToError(const Status& st);

}  // namespace pion::net
