// oneDNN plumbing shared by the kernels that use it: the process-wide CPU engine, the primitives a
// node's kernel built by description, execution with a scratchpad of the caller's own, and the
// threads a call runs with (OpenMP or oneTBB, whichever oneDNN was built on).
//
// Building a primitive descriptor costs tens of microseconds (implementation search, JIT); a step
// runs the same shapes again and again, so kernels describe the problem as a key and build once,
// into a cache their node holds (DnnlKernelState, built when the plan is): it keeps the problems the
// node saw last, so a node whose shapes vary holds a bounded number of primitives, and they go with
// the plan.
// Primitives are created with a user scratchpad, which each execution allocates from the host
// allocator, so two threads may run the same cached primitive at once. A primitive may want an
// argument in its own layout (oneDNN's blocked filters, say): execution then reorders that argument
// from the caller's plain layout into a temporary (an input) or back from one (an output).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "graph/status.h"
#include "runtime/bounded_cache.h"
#include "runtime/device.h"
#include "runtime/kernel.h"

namespace mirra::ops::cpu {

dnnl::engine& dnnl_engine();

// Runs `call`, which calls oneDNN, with `threads` threads inside those calls. oneDNN on OpenMP (Debian's)
// gets that team size on the calling thread (a per-thread setting, cached). oneDNN on oneTBB spreads
// its work over the caller's arena: a call of one thread runs in an arena of its own of one thread,
// any other count shares the caller's arena.
void with_dnnl_threads(int threads, const std::function<void()>& call);

// Primitive attributes asking for a user-managed scratchpad (use them for every cached primitive).
dnnl::primitive_attr dnnl_user_scratchpad();

struct DnnlPrimitive {
  // An argument the primitive wants in another layout than the caller's, and the reorder between them.
  struct Relayout {
    dnnl::memory::desc wanted;
    dnnl::reorder reorder;  // caller -> wanted for inputs, wanted -> caller for outputs
    bool output = false;
  };

  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  std::unordered_map<int, Relayout> relayouts;  // by DNNL_ARG_*

  // Records that argument `arg`, given as `given`, is wanted as `wanted` (nothing when they agree).
  void relayout(int arg, const dnnl::memory::desc& given, const dnnl::memory::desc& wanted, bool output);
};

// A cache key: `kind` followed by the numbers that describe the problem.
std::string dnnl_key(std::string_view kind, std::initializer_list<int64_t> numbers);

// The primitives of one node, by key: those of its last kPrimitivesPerNode problems.
using DnnlPrimitiveCache = runtime::BoundedCache<std::string, const DnnlPrimitive>;
inline constexpr size_t kPrimitivesPerNode = 16;

// The state of a kernel that calls oneDNN: its node's primitives (kernels with attributes to parse
// derive from it).
struct DnnlKernelState : runtime::KernelState {
  DnnlPrimitiveCache primitives{kPrimitivesPerNode};
};

// KernelDef::prepare of a kernel whose state is a DnnlKernelState alone.
graph::Expected<std::unique_ptr<runtime::KernelState>> prepare_dnnl_kernel(const graph::Node& node,
                                                                         const runtime::Device& device);

// The primitive `cache` holds under `key`, built by `make` when it holds none (errors are not cached).
// It is built with the threads it will run with on `device` (dnnl_execute's `threads`: 0 for the
// device's intra-op share): oneDNN fixes when it builds a primitive how the primitive splits its
// work among threads, and so the order of its sums (a convolution's filter gradient), whatever the
// calling thread's last call used.
graph::Expected<std::shared_ptr<const DnnlPrimitive>> cached_dnnl_primitive(DnnlPrimitiveCache& cache,
                                                                           const std::string& key,
                                                                           const std::function<DnnlPrimitive()>& make,
                                                                           const runtime::Device& device, int threads = 0);

// Runs `primitive` with `args` in the caller's layouts (reordering those it wants otherwise, with a
// fresh scratchpad from `device`'s memory) on a stream and waits, with `threads` threads inside
// (with_dnnl_threads; 0: the device's intra-op share); oneDNN errors become a Status.
graph::Status dnnl_execute(const DnnlPrimitive& primitive, std::unordered_map<int, dnnl::memory> args,
                           const runtime::Device& device, int threads = 0);

}  // namespace mirra::ops::cpu
