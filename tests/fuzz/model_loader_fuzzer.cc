// libFuzzer target: arbitrary bytes as a model file and as a checkpoint. Loading must return a model
// or an error, never crash; a model that loads must write back out and load again as the same graph,
// and what `mirra train` does next (autodiff and the optimizer, then the Mirrored rewrite over three
// devices) must return a program or an error, never crash or break the graph's structure.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "graph/print.h"
#include "graph/verify.h"
#include "ops/registry.h"
#include "serialization/checkpoint.h"
#include "serialization/model_file.h"
#include "strategies/strategy.h"
#include "tools/mirra/model_program.h"

namespace {

void train_like_the_runner(const mirra::serialization::Model& model) {
  using namespace mirra;
  auto program = runner::build_model_program(model, std::nullopt);
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
    train_like_the_runner(*model);
  }
  (void)serialization::parse_checkpoint(bytes, "fuzz input");
  return 0;
}
