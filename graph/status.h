// Status and Expected<T>: how mirra reports errors that come from user input, files, devices and peers.
// A Status is cheap to copy (one pointer; null means ok). Expected<T> holds a value or a non-ok Status.
// Broken internal invariants do not use these; they abort through MIRRA_CHECK (check.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mirra::graph {

enum class StatusCode {
  ok,
  invalid_argument,
  not_found,
  failed_precondition,
  out_of_range,
  unimplemented,
  internal,
  cancelled,
  data_loss,
  resource_exhausted,  // memory (or another budget) ran out; the input may be fine on a bigger machine
  unavailable,         // a device or peer cannot be reached now; retrying later may succeed
  deadline_exceeded,   // something (a collective's peers) did not finish in time
  aborted,             // the work was abandoned because another part of it failed (a peer, a stream)
};

std::string_view status_code_name(StatusCode code);

// True when `code` blames what the caller gave (a file, a config, a flag, data, a model too big for
// its memory limit); false when the environment or mirra failed (a device or peer unavailable, a
// deadline, an abandoned step, an internal error). The runner's exit codes follow it (2 and 1).
bool blames_input(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::ok; }
  const std::string& message() const;
  // "invalid_argument: message", or "ok".
  std::string to_string() const;
  // The same error with "context: " put before its message; ok stays ok.
  Status with_context(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status invalid_argument(std::string message) { return {StatusCode::invalid_argument, std::move(message)}; }
inline Status not_found(std::string message) { return {StatusCode::not_found, std::move(message)}; }
inline Status failed_precondition(std::string message) {
  return {StatusCode::failed_precondition, std::move(message)};
}
inline Status out_of_range(std::string message) { return {StatusCode::out_of_range, std::move(message)}; }
inline Status unimplemented(std::string message) { return {StatusCode::unimplemented, std::move(message)}; }
inline Status internal_error(std::string message) { return {StatusCode::internal, std::move(message)}; }
inline Status data_loss(std::string message) { return {StatusCode::data_loss, std::move(message)}; }
inline Status resource_exhausted(std::string message) { return {StatusCode::resource_exhausted, std::move(message)}; }
inline Status unavailable(std::string message) { return {StatusCode::unavailable, std::move(message)}; }
inline Status deadline_exceeded(std::string message) { return {StatusCode::deadline_exceeded, std::move(message)}; }
inline Status aborted(std::string message) { return {StatusCode::aborted, std::move(message)}; }

// A value of type T, or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : storage_(std::in_place_index<1>, std::move(status)) {}  // NOLINT

  bool ok() const { return storage_.index() == 0; }
  explicit operator bool() const { return ok(); }
  Status status() const { return ok() ? Status() : std::get<1>(storage_); }

  T& value() & { return std::get<0>(storage_); }
  const T& value() const& { return std::get<0>(storage_); }
  T&& value() && { return std::get<0>(std::move(storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace mirra::graph

#define MIRRA_STATUS_CONCAT_INNER(a, b) a##b
#define MIRRA_STATUS_CONCAT(a, b) MIRRA_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define MIRRA_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::mirra::graph::Status mirra_status_ = (expr);  \
    if (!mirra_status_.ok()) return mirra_status_;  \
  } while (0)

// `lhs = value of expr`, or returns its Status from the enclosing function.
#define MIRRA_ASSIGN_OR_RETURN(lhs, expr) \
  MIRRA_ASSIGN_OR_RETURN_IMPL(MIRRA_STATUS_CONCAT(mirra_expected_, __LINE__), lhs, expr)
#define MIRRA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
