// libFuzzer target: arbitrary bytes as a model file and as a checkpoint. Loading must return a model
// or an error, never crash; a model that loads must write back out and load again as the same graph,
// every output it declares must have dims of -1 or more and a byte size that int64 counts at batch 1
// (the oracle for attributes that size outputs), a model that plans to use little memory must run its
// forward pass (every kernel sizing its outputs from attributes that loading checked), and what `mirra train`
// does next (autodiff and the optimizer, then the Mirrored rewrite over three devices) must return a
// program or an error, never crash or break the graph's structure.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "graph/print.h"
#include "graph/verify.h"
#include "ops/registry.h"
#include "runtime/memory_estimate.h"
#include "runtime/session.h"
#include "serialization/checkpoint.h"
#include "serialization/model_file.h"
#include "strategies/strategy.h"
#include "tools/mirra/model_program.h"

namespace {

void check_output_sizes(const mirra::graph::Graph& graph) {
  for (const mirra::graph::Node& node : graph.nodes()) {
    for (const mirra::graph::TensorType& type : node.outputs) {
      for (int64_t d : type.shape.dims) {
        if (d < mirra::graph::kUnknownDim) std::abort();
      }
      if (!type.byte_size_at(1)) std::abort();
    }
  }
}

// The convolutions' multiply-adds at batch 2 (each output element times its filter's window and
// input channels): a filter thousands wide keeps the memory small but not the time.
double convolution_work(const mirra::graph::Graph& g) {
  double work = 0;
  for (const mirra::graph::Node& node : g.nodes()) {
    if (node.op != "Conv2D" && node.op != "FusedConv2D" && !node.op.starts_with("Conv2DBackprop")) continue;
    if (node.inputs.size() < 2 || node.outputs.empty()) continue;
    const std::vector<int64_t>& filter = g.type(node.inputs[1]).shape.dims;
    double outputs = 1, window = 1;
    for (int64_t d : node.outputs[0].shape.dims) outputs *= static_cast<double>(d < 0 ? 2 : d);
    for (size_t i = 0; i + 1 < filter.size(); ++i) window *= static_cast<double>(std::max<int64_t>(filter[i], 1));
    work += outputs * window;
  }
  return work;
}

// Zeros for every placeholder (unknown dims 2), then the loss: errors are fine, crashes are not.
void run_forward_pass(const mirra::serialization::Model& model) {
  using namespace mirra;
  constexpr int64_t kLimit = int64_t{64} << 20;
  constexpr double kWorkLimit = 1e8;  // multiply-adds: well under a second here, under the sanitizers
  auto estimate = runtime::estimate_memory(model.graph, 2);
  if (!estimate.ok() || estimate->peak_bytes > kLimit || convolution_work(model.graph) > kWorkLimit) return;
  runtime::Feeds feeds;
  for (const graph::Node& node : model.graph.nodes()) {
    if (node.op != "Placeholder") continue;
    std::vector<int64_t> dims = node.outputs[0].shape.dims;
    for (int64_t& d : dims) d = d < 0 ? 2 : d;
    runtime::Tensor zeros = runtime::Tensor::empty(runtime::host_allocator(), node.outputs[0].dtype, runtime::TensorShape(dims));
    if (zeros.byte_size() > 0) std::memset(zeros.mutable_raw_data(), 0, zeros.byte_size());
    feeds.emplace(node.name, std::move(zeros));
  }
  runtime::Session session(model.graph, ops::kernels(), {.threads = 1, .deterministic = true, .memory_limit = kLimit});
  (void)session.run(feeds, {model.signature.loss});
}

void train_like_the_runner(const mirra::serialization::Model& model) {
  using namespace mirra;
  auto program = runner::build_model_program(model);
  if (!program.ok()) return;
  if (!graph::verify_structure(program->program.graph).ok()) std::abort();
  static const auto strategy = [] {
    strategies::StrategyConfig config;
    config.devices = {{graph::DeviceKind::cpu, 0}, {graph::DeviceKind::cpu, 1}, {graph::DeviceKind::cpu, 2}};
    auto made = strategies::make_strategy(config);
    return std::move(made).value();
  }();
  auto distributed = strategy->distribute(program->program);
  if (distributed.ok() && !graph::verify_structure(distributed->graph).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mirra;
  const std::span<const uint8_t> bytes(data, size);
  auto model = serialization::parse_model(bytes, ops::registry(), "fuzz input");
  if (model.ok()) {
    auto written = serialization::serialize_model(*model);
    if (!written.ok()) std::abort();
    auto again = serialization::parse_model({written->data(), written->size()}, ops::registry(),
                                             "rewritten fuzz input");
    if (!again.ok() || graph::to_text(again->graph) != graph::to_text(model->graph)) std::abort();
    check_output_sizes(model->graph);
    run_forward_pass(*model);
    train_like_the_runner(*model);
  }
  (void)serialization::parse_checkpoint(bytes, "fuzz input");
  return 0;
}
