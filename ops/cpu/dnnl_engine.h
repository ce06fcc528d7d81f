// The process-wide oneDNN CPU engine, and helpers to describe mirra tensors to oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "graph/status.h"

namespace mirra::ops::cpu {

dnnl::engine& dnnl_engine();

// Runs `primitive` with `args` on a fresh stream and waits; oneDNN errors become a Status.
graph::Status dnnl_execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

}  // namespace mirra::ops::cpu
