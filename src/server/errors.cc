#include "server/errors.h"

#include "base/strutil.h"

namespace pion::server {

std::string WrongArity(std::string_view cmd) {
  std::string s = "ERR wrong number of arguments for '";
  s += ToLower(cmd);
  s += "' command";
  return s;
}

}  // namespace pion::server
