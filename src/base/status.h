// Status and Result<T>: expected failures travel as values. A Status is a code
// plus, for the failures a caller or a client must tell apart, a reason: a value of
// an enum its subsystem owns (store::Reason, attend::Reason, quant::Reason), with up
// to four integer fields and one name. Its message is for logs only. Replies are
// worded in one table from (code, reason, fields), src/kvproto/errors.cc, which gives a
// Status without a reason its Code's code word and message; the code words clients see are
// in docs/protocol.md "Error code words". OK costs one null pointer.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
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

// A reason enum: an enum class whose value 0 means "none" and whose owner declares,
// beside it, `constexpr std::string_view ReasonDomain(E) { return "name"; }` (found
// by argument-dependent lookup; the name is for logs). base knows no reason.
template <typename E>
concept ReasonEnum = std::is_enum_v<E> && requires(E e) {
  { ReasonDomain(e) } -> std::convertible_to<std::string_view>;
};

// The integers a reason carries (sizes, indexes, limits), read by position; each
// reason's comment says which. Built from up to four integers: {expected, got}.
class ReasonFields {
 public:
  static constexpr size_t kMax = 4;
  ReasonFields() = default;
  template <typename... T>
  requires(sizeof...(T) <= kMax && (std::is_integral_v<T> && ...)) ReasonFields(T... v)
      : v_{static_cast<int64_t>(v)...} {}  // NOLINT: implicit by design
  int64_t operator[](size_t i) const { return i < kMax ? v_[i] : 0; }

 private:
  std::array<int64_t, kMax> v_{};
};

namespace status_internal {
// One address per reason enum: tells the domains apart without a central list.
template <typename E>
inline constexpr char kDomainTag = 0;
}  // namespace status_internal

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  // A failure without a reason: the message is the whole story (a log line; a
  // reply shows it only through StatusToError's code-word-and-message form). Both
  // constructors are [[nodiscard]]: a Status built and dropped (a `return`
  // forgotten) fails the build.
  [[nodiscard]] Status(Code code, std::string_view msg)
      : rep_(code == Code::kOk ? nullptr : std::make_unique<Rep>(Rep{code, {}, std::string(msg)})) {
  }
  // A failure with a reason, its fields and, for logs, a message.
  template <ReasonEnum E>
  [[nodiscard]] Status(Code code, E reason, ReasonFields fields = {}, std::string_view log_msg = {})
      : rep_(code == Code::kOk ? nullptr
                               : std::make_unique<Rep>(Rep{code,
                                                           {&status_internal::kDomainTag<E>,
                                                            ReasonDomain(reason),
                                                            static_cast<uint32_t>(reason),
                                                            fields,
                                                            {}},
                                                           std::string(log_msg)})) {}
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

  // The same status naming a thing (a namespace...) the reason refers to.
  Status&& WithName(std::string_view name) && {
    if (rep_) rep_->reason.name = std::string(name);
    return std::move(*this);
  }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  // The reason when it is one of E's, else E{} (none).
  template <ReasonEnum E>
  E reason() const {
    return rep_ && rep_->reason.tag == &status_internal::kDomainTag<E>
               ? static_cast<E>(rep_->reason.value)
               : E{};
  }
  bool has_reason() const { return rep_ && rep_->reason.tag != nullptr; }
  int64_t field(size_t i) const { return rep_ ? rep_->reason.fields[i] : 0; }
  std::string_view name() const { return rep_ ? std::string_view(rep_->reason.name) : ""; }
  // For logs: the message without any code word ("non-finite value in row 3").
  std::string_view message() const { return rep_ ? std::string_view(rep_->msg) : ""; }
  // For logs: "InvalidArgument: <message>", and the reason when there is one
  // ("InvalidArgument: [store 7 (3, 0, 0, 0)] <message>").
  std::string ToString() const;

 private:
  struct ReasonRep {
    const void* tag = nullptr;  // status_internal::kDomainTag<E>; null: none
    std::string_view domain;    // ReasonDomain(E{}): a literal
    uint32_t value = 0;
    ReasonFields fields;
    std::string name;
  };
  struct Rep {
    Code code;
    ReasonRep reason;
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
