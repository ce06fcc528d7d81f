// libFuzzer target: arbitrary bytes as a model file and as a checkpoint. Loading must return a model
// or an error, never crash; a model that loads must write back out and load again as the same graph.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "graph/print.h"
#include "ops/registry.h"
#include "serialization/checkpoint.h"
#include "serialization/model_file.h"

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
  }
  (void)serialization::parse_checkpoint(bytes, "fuzz input");
  return 0;
}
