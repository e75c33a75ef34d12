#include "net/resp_errors.h"

namespace pion::net {

std::string StatusToError(const Status& st) {
  std::string_view word;
  switch (st.code()) {
    case Code::kOutOfBudget:
      word = "OOM";
      break;
    case Code::kLoading:
      word = "LOADING";
      break;
    default:
      word = "ERR";
      break;
  }
  std::string_view msg = st.message();
  if (st.code() == Code::kWrongType) return std::string(kErrWrongType);
  if (st.code() == Code::kOutOfBudget && msg.empty()) return std::string(kErrOom);
  std::string s(word);
  s += ' ';
  s += msg;
  return s;
}

}  // namespace pion::net
