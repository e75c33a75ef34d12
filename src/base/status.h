// Status and Result<T>: expected failures travel as values. A Status is a code
// plus a human-readable message; OK costs one null pointer. Codes become RESP
// error words in one table (src/net/resp_errors.cc; the words clients see are in
// docs/protocol.md "Error code words"); everything below the command layer only
// returns values.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/check.h"

namespace pion {

enum class Code : unsigned char {
  kOk = 0,
  kNotFound,         // a named thing does not exist
  kInvalidArgument,  // bad input from a client or file
  kCorruption,       // stored bytes fail their checks
  kIOError,          // the OS refused a read/write/sync
  kOutOfBudget,      // memory budget (maxmemory) cannot be met -> -OOM
  kNotSupported,     // valid request this build or mode cannot serve
  kBusy,             // try again later (e.g. a save already running)
  kLoading,          // recovery still running -> -LOADING
  kWrongType,        // a key holds another kind of value -> -WRONGTYPE
};

// A finer reason than the code, for the few failures a caller must tell apart
// without reading the message (the command layer words them its own way).
enum class ErrorId : unsigned char {
  kNone = 0,
  kSizeMismatch,   // an input's length does not match the shape it declares
  kNothingStored,  // the named thing exists but holds nothing to return
  // KV.PREFIX.REGISTER ... PARENT (store lineage):
  kParentNotFound,  // the parent is not registered
  kParentDim,       // the parent has another kv_dim
  kParentMismatch,  // re-registration names another parent (or one the namespace lacks)
  kChainTooLong,    // the chain would exceed max-chain-length
  kDropRefused,     // a DROP's predicate refused a namespace it would remove
  kBlockQuantized,  // an edit (APPEND, SETRANGE, ...) or COPY of a quantized block
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string_view msg, ErrorId id = ErrorId::kNone)
      : rep_(code == Code::kOk ? nullptr : std::make_unique<Rep>(Rep{code, id, std::string(msg)})) {
  }
  Status(const Status& o) : rep_(o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr) {}
  Status& operator=(const Status& o) {
    rep_ = o.rep_ ? std::make_unique<Rep>(*o.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m) { return Status(Code::kNotFound, m); }
  static Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
  static Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
  static Status IOError(std::string_view m) { return Status(Code::kIOError, m); }
  static Status OutOfBudget(std::string_view m) { return Status(Code::kOutOfBudget, m); }
  static Status NotSupported(std::string_view m) { return Status(Code::kNotSupported, m); }
  static Status Busy(std::string_view m) { return Status(Code::kBusy, m); }
  static Status Loading(std::string_view m) { return Status(Code::kLoading, m); }
  static Status WrongType() { return Status(Code::kWrongType, ""); }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  ErrorId id() const { return rep_ ? rep_->id : ErrorId::kNone; }
  // The message without any code word ("non-finite value in row 3").
  std::string_view message() const { return rep_ ? std::string_view(rep_->msg) : ""; }
  std::string ToString() const;

 private:
  struct Rep {
    Code code;
    ErrorId id;
    std::string msg;
  };
  std::unique_ptr<Rep> rep_;
};

// A value or a non-OK Status (Dragonfly's OpResult shape).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) { PION_CHECK(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & {
    PION_CHECK(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    PION_CHECK(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    PION_CHECK(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

#define PION_RETURN_IF_ERROR(expr) \
  do {                             \
    ::pion::Status _st = (expr);   \
    if (!_st.ok()) return _st;     \
  } while (0)

}  // namespace pion
