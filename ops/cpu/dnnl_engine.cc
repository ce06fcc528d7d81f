// oneDNN engine and execution.
#include "ops/cpu/dnnl_engine.h"

namespace mirra::ops::cpu {

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

graph::Status dnnl_execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  try {
    dnnl::stream stream(dnnl_engine());
    primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN: ") + e.what());
  }
  return graph::Status();
}

}  // namespace mirra::ops::cpu
