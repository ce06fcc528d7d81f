// DeviceKind: what sort of device a node runs on, as a registered name. cpu, gpu and cpu_async are
// built in; a backend adds its own kind with one registration (runtime::register_device_kind, which
// also tells the runtime how to open its devices and what they can do). The graph layer keeps only
// what graphs need: the kind's name (and aliases, such as "cuda" for gpu) and whether its devices
// have memory of their own, and so split into logical devices that share it.
//
//   graph::Expected<DeviceKind> xpu = graph::register_device_kind({.name = "xpu", .own_memory = true});
//   std::optional<DeviceKind> kind = graph::find_device_kind("cuda");  // DeviceKind::gpu
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"

namespace mirra::graph {

class DeviceKind {
 public:
  static const DeviceKind cpu;        // host memory, kernels run inline on the executor's threads
  static const DeviceKind gpu;        // a CUDA GPU (runtime/cuda/)
  static const DeviceKind cpu_async;  // the CPU's kernels on a stream, in memory of its own (the GPU's model)

  constexpr DeviceKind() = default;  // cpu
  // Its place in the table of kinds, in order of registration (the built-ins first).
  constexpr uint8_t index() const { return index_; }
  friend constexpr auto operator<=>(DeviceKind, DeviceKind) = default;

 private:
  friend class DeviceKindTable;
  constexpr explicit DeviceKind(uint8_t index) : index_(index) {}
  uint8_t index_ = 0;
};

inline constexpr DeviceKind DeviceKind::cpu{0};
inline constexpr DeviceKind DeviceKind::gpu{1};
inline constexpr DeviceKind DeviceKind::cpu_async{2};

// At most this many kinds, the built-ins included.
inline constexpr int kMaxDeviceKinds = 32;

struct DeviceKindTraits {
  std::string name;                  // as devices are written: "<name>:<ordinal>"
  std::vector<std::string> aliases;  // other spellings parse accepts
  bool own_memory = false;           // false: its devices compute in host memory
};

// A new kind, or invalid_argument when its name or an alias is taken or is not written as a name
// ([a-z][a-z0-9_]*), or resource_exhausted when kMaxDeviceKinds are registered. Thread-safe; a
// kind is for the life of the process.
Expected<DeviceKind> register_device_kind(DeviceKindTraits traits);
// The kind named `name` or one of its aliases.
std::optional<DeviceKind> find_device_kind(std::string_view name);
// Every kind registered, in order.
std::vector<DeviceKind> device_kinds();
// "'cpu', 'gpu' (also 'cuda'), 'cpu_async'": for messages that list what there is.
std::string device_kind_list();

std::string_view device_kind_name(DeviceKind kind);
// Whether devices of this kind have memory of their own (and so may be split into logical devices).
bool has_own_memory(DeviceKind kind);

}  // namespace mirra::graph
