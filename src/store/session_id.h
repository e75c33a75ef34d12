// Session ids of the V-store: "<ns>_pk" is a namespace's K side, "<ns>_pv"
// its V side.
//
// Thread-safety: pure function.
#pragma once

#include <string_view>

#include "store/mutation.h"

namespace pion::store {

// Splits "<ns>_pk"/"<ns>_pv" into the namespace and side; false for any other id.
bool ParseSessionId(std::string_view sid, std::string_view* ns, Side* side);

}  // namespace pion::store
