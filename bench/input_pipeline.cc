// run_input_pipeline: a Dataset feeding each field as itself, read for warm-up and timed batches.
#include "bench/input_pipeline.h"

#include <tbb/global_control.h>

#include <chrono>

#include "runtime/data/dataset.h"

namespace mirra::bench {

namespace {

// The graph dtype that holds a field's values unchanged (or widened, for the types graphs lack).
graph::DType holding(runtime::data::ElementType type) {
  using runtime::data::ElementType;
  switch (type) {
    case ElementType::boolean: return graph::DType::boolean;
    case ElementType::u8: return graph::DType::u8;
    case ElementType::i8: case ElementType::i16: case ElementType::u16: case ElementType::i32: return graph::DType::i32;
    case ElementType::u32: case ElementType::i64: case ElementType::u64: return graph::DType::i64;
    case ElementType::f16: return graph::DType::f16;
    case ElementType::bf16: return graph::DType::bf16;
    case ElementType::f32: return graph::DType::f32;
    case ElementType::f64: return graph::DType::f64;
  }
  return graph::DType::f32;
}

}  // namespace

graph::Expected<nlohmann::json> run_input_pipeline(std::shared_ptr<const runtime::data::ExampleSource> source,
                                                   const InputPipelineOptions& options) {
  if (options.batches < 1 || options.warmup_batches < 0) return graph::invalid_argument("time at least one batch");
  // The pipeline's threads and nothing else: a training step would have its own.
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(options.threads) + 1);
  std::vector<runtime::data::Feed> feeds;
  for (const runtime::data::Field& field : source->fields()) {
    feeds.push_back({.placeholder = field.name, .field = field.name, .dtype = holding(field.type)});
  }
  const std::string name = source->name();
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset data,
                         runtime::data::Dataset::create(std::move(source), std::move(feeds),
                                                        {.batch_size = options.batch_size, .seed = 1, .threads = options.threads}));
  if (data.batches_per_epoch() == 0) return graph::invalid_argument(name + ": no batch in an epoch");
  using Clock = std::chrono::steady_clock;
  int64_t taken = 0, examples = 0, bytes = 0;
  Clock::time_point start;
  for (int64_t epoch = 0; taken < options.warmup_batches + options.batches; ++epoch) {
    auto reader = data.epoch(epoch);
    for (;;) {
      if (taken == options.warmup_batches) start = Clock::now();
      MIRRA_ASSIGN_OR_RETURN(std::optional<runtime::data::Batch> batch, reader.next());
      if (!batch || taken == options.warmup_batches + options.batches) break;
      if (taken++ >= options.warmup_batches) {
        examples += batch->size;
        for (const auto& [placeholder, tensor] : batch->tensors) bytes += static_cast<int64_t>(tensor.byte_size());
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return nlohmann::json{{"benchmark", "input pipeline"},
                        {"data", name},
                        {"batch_size", options.batch_size},
                        {"batches", options.batches},
                        {"threads", options.threads},
                        {"examples_per_s", static_cast<double>(examples) / seconds},
                        {"batch_mb_per_s", static_cast<double>(bytes) / seconds / 1e6}};
}

}  // namespace mirra::bench
