// mirra eval: the model's accuracy, mean loss and metrics on evaluation data (by default the Fashion-MNIST
// test split), on one device.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "ops/inference_mode.h"
#include "ops/registry.h"
#include "runtime/training/trainer.h"
#include "serialization/model_file.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/metrics_json.h"
#include "tools/mirra/model_program.h"
#include "tools/mirra/program_data.h"
#include "tools/mirra/variables_io.h"

namespace mirra::runner {

namespace {

graph::Expected<runtime::training::Evaluation> evaluate(const EvalCommand& command) {
  MIRRA_ASSIGN_OR_RETURN(serialization::Model model, serialization::load_model(command.model, ops::registry()));
  MIRRA_ASSIGN_OR_RETURN(runtime::training::TrainingGraph signature, trainer_signature(model.signature));
  // Batch normalisation evaluates with its moving statistics.
  MIRRA_RETURN_IF_ERROR(ops::add_inference_values(model.graph, ops::registry(), signature));
  signature = signature.for_evaluation();
  MIRRA_ASSIGN_OR_RETURN(const DataSpec spec, parse_data_shorthand(command.data, "--data"));
  MIRRA_ASSIGN_OR_RETURN(const auto test, program_dataset(spec, model.graph, signature, DataUse::eval,
                                                          {.batch_size = command.batch_size, .shuffle = false,
                                                           .threads = command.data_threads}));
  if (const graph::Status fed = runtime::training::check_fed_by_batches(model.graph, signature, test.placeholders(),
                                                                        /*training=*/false);
      !fed.ok()) {
    return graph::invalid_argument("model '" + command.model + "': " + fed.message());
  }
  const int64_t memory_limit = memory_limit_bytes(command.memory_limit);
  const graph::NodeId evaluated[] = {signature.loss.node, signature.correct.node};
  MIRRA_RETURN_IF_ERROR(check_memory(model.graph, ops::registry(), command.batch_size, memory_limit, evaluated));
  runtime::Session session(model.graph, ops::kernels(), {.threads = command.threads, .memory_limit = memory_limit});
  MIRRA_RETURN_IF_ERROR(write_variables(session, model.weights, /*require_all=*/false, "model file '" + command.model + "'"));
  runtime::training::Trainer trainer(session, signature);
  return trainer.evaluate(test);
}

}  // namespace

int run_eval(const EvalCommand& command) {
  const auto result = evaluate(command);
  if (!result.ok()) return report_error(result.status());
  if (command.json) {
    nlohmann::json summary = {{"model", command.model}, {"examples", result->examples}, {"test_loss", result->mean_loss}};
    if (result->accuracy) summary["test_accuracy"] = *result->accuracy;
    if (!result->metrics.empty()) summary["test_metrics"] = metrics_json(result->metrics);
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("%s:", command.model.c_str());
    if (result->accuracy) std::printf(" test accuracy %.4f,", *result->accuracy);
    std::printf(" test loss %.4f", result->mean_loss);
    for (const auto& [name, value] : result->metrics) std::printf(", test %s %.4g", name.c_str(), value);
    std::printf(" over %lld examples\n", static_cast<long long>(result->examples));
  }
  return 0;
}

}  // namespace mirra::runner
