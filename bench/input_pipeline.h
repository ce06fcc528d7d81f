// The input pipeline's throughput: batches of a data set assembled as training assembles them
// (shuffled, converted, prefetched, spread over `threads` threads), every field fed as it is, counted
// in examples/s and in the bytes of the batches made per second. `mirra bench data` runs it on a
// config's training data; bench/input_pipeline_vs_peers.py holds it next to tf.data and PyTorch's
// DataLoader on the same files.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::bench {

struct InputPipelineOptions {
  int64_t batch_size = 128;
  int64_t batches = 200;        // timed
  int64_t warmup_batches = 10;  // before the timed ones
  int threads = 1;
};

graph::Expected<nlohmann::json> run_input_pipeline(std::shared_ptr<const runtime::data::ExampleSource> source,
                                                   const InputPipelineOptions& options);

}  // namespace mirra::bench
