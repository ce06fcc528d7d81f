// The registry of communicators by name: a communicator from outside the tree takes one call,
// register_communicator, and every session made afterwards offers one of its own to its kernels beside
// the session's own (in process, or MPI's across workers), so that a collective whose `implementation`
// attr names it (`all_reduce.implementation` in a strategy's config) calls it. Built-in names: "auto"
// (a session's first communicator), "in_process", "mpi".
//
//   MIRRA_RETURN_IF_ERROR(runtime::register_communicator("shm", [] { return std::make_shared<Shm>(); }));
//   // config: {"all_reduce": {"implementation": "shm"}}
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/status.h"
#include "runtime/collectives/communicator.h"

namespace mirra::runtime {

// Makes one communicator for one session; its name() must be the name it was registered under.
using CommunicatorFactory = std::function<std::shared_ptr<Communicator>()>;

// Refused, naming it: an empty name or one of other characters than [a-z0-9_], a built-in name, a name
// already registered, a factory that is empty. Thread-safe.
graph::Status register_communicator(std::string name, CommunicatorFactory make);

// The registered communicators, in the order of their registration.
std::vector<std::pair<std::string, CommunicatorFactory>> registered_communicators();

// Whether a collective may name `name`: a built-in name or a registered one.
bool is_communicator_name(std::string_view name);
// Every name a collective may name, for messages: "auto, in_process, mpi, shm".
std::string communicator_names();

}  // namespace mirra::runtime
