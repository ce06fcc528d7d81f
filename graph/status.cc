// Status: error codes, messages and their formatting.
#include "graph/status.h"

namespace mirra::graph {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::not_found: return "not_found";
    case StatusCode::failed_precondition: return "failed_precondition";
    case StatusCode::out_of_range: return "out_of_range";
    case StatusCode::unimplemented: return "unimplemented";
    case StatusCode::internal: return "internal";
    case StatusCode::cancelled: return "cancelled";
    case StatusCode::data_loss: return "data_loss";
    case StatusCode::resource_exhausted: return "resource_exhausted";
    case StatusCode::unavailable: return "unavailable";
    case StatusCode::deadline_exceeded: return "deadline_exceeded";
    case StatusCode::aborted: return "aborted";
  }
  return "unknown";
}

bool blames_input(StatusCode code) {
  switch (code) {
    case StatusCode::invalid_argument:
    case StatusCode::not_found:
    case StatusCode::failed_precondition:
    case StatusCode::out_of_range:
    case StatusCode::unimplemented:
    case StatusCode::data_loss:
    case StatusCode::resource_exhausted:
      return true;
    case StatusCode::ok:
    case StatusCode::internal:
    case StatusCode::cancelled:
    case StatusCode::unavailable:
    case StatusCode::deadline_exceeded:
    case StatusCode::aborted:
      return false;
  }
  return false;
}

Status::Status(StatusCode code, std::string message)
    : state_(code == StatusCode::ok ? nullptr
                                    : std::make_shared<const State>(State{code, std::move(message)})) {}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code())) + ": " + message();
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code(), std::string(context) + ": " + message());
}

}  // namespace mirra::graph
