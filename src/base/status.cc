#include "base/status.h"

namespace pion {

namespace {
const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kNotFound:
      return "NotFound";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kCorruption:
      return "Corruption";
    case Code::kIOError:
      return "IOError";
    case Code::kOutOfBudget:
      return "OutOfBudget";
    case Code::kNotSupported:
      return "NotSupported";
    case Code::kBusy:
      return "Busy";
    case Code::kLoading:
      return "Loading";
    case Code::kWrongType:
      return "WrongType";
  }
  return "Unknown";
}
}  // namespace

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = CodeName(code());
  s += ": ";
  s += message();
  return s;
}

}  // namespace pion
