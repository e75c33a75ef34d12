// Session ids: see session_id.h.
#include "store/session_id.h"

namespace pion::store {

bool ParseSessionId(std::string_view sid, std::string_view* ns, Side* side) {
  if (sid.size() < 4) return false;
  std::string_view suffix = sid.substr(sid.size() - 3);
  if (suffix == "_pk") {
    *side = Side::kKeys;
  } else if (suffix == "_pv") {
    *side = Side::kValues;
  } else {
    return false;
  }
  *ns = sid.substr(0, sid.size() - 3);
  return true;
}

}  // namespace pion::store
