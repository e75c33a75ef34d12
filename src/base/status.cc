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
  if (has_reason()) {
    s += '[';
    s += rep_->reason.domain;
    s += ' ' + std::to_string(rep_->reason.value) + " (";
    for (size_t i = 0; i < ReasonFields::kMax; ++i) {
      if (i > 0) s += ", ";
      s += std::to_string(rep_->reason.fields[i]);
    }
    s += ')';
    if (!rep_->reason.name.empty()) s += " '" + rep_->reason.name + "'";
    s += ']';
    if (!message().empty()) s += ' ';
  }
  s += message();
  return s;
}

}  // namespace pion
