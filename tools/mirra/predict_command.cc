// mirra predict: the model's outputs over a data set, in inference mode (batch normalisation with its
// moving statistics), in batches, on one device or data-parallel over several (each batch split
// between them, a session and a copy of the weights on each); written as an .npy file (one output) or
// an .npz archive (one member per output, named as the output).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <thread>

#include "ops/inference_mode.h"
#include "ops/registry.h"
#include "runtime/collectives/communicator.h"
#include "runtime/data/numpy_file.h"
#include "serialization/model_file.h"
#include "strategies/config.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/model_program.h"
#include "tools/mirra/program_data.h"
#include "tools/mirra/variables_io.h"

namespace mirra::runner {

namespace {

// "logits/BiasAdd" or "argmax:0": a value of the graph.
graph::Expected<graph::ValueRef> parse_output(const graph::Graph& graph, const std::string& name) {
  std::string node = name;
  uint16_t output = 0;
  if (const size_t colon = name.rfind(':'); colon != std::string::npos && colon + 1 < name.size() &&
                                            name.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    node = name.substr(0, colon);
    output = static_cast<uint16_t>(std::min<size_t>(std::stoul(name.substr(colon + 1)), 65535));
  }
  const auto id = graph.find(node);
  if (!id) return graph::invalid_argument("--outputs: the model has no node '" + node + "'");
  if (output >= graph.node(*id).outputs.size()) {
    return graph::invalid_argument("--outputs: node '" + node + "' has " + std::to_string(graph.node(*id).outputs.size()) +
                                   " outputs, not an output " + std::to_string(output));
  }
  return graph::ValueRef{*id, output};
}

// One output's values over every example, as they come.
struct Gathered {
  std::string name;
  graph::DType dtype = graph::DType::f32;
  std::vector<int64_t> example_shape;
  std::vector<std::byte> bytes;
  int64_t examples = 0;
};

graph::Status append(Gathered& out, const runtime::Tensor& value, int64_t examples) {
  const std::span<const int64_t> dims = value.shape().dims();
  if (dims.empty() || dims[0] != examples) {
    return graph::invalid_argument("--outputs: '" + out.name + "' is " + value.type_string() + " for a batch of " +
                                   std::to_string(examples) + ": not one row per example");
  }
  const std::vector<int64_t> example_shape(dims.begin() + 1, dims.end());
  if (out.examples > 0 && (example_shape != out.example_shape || value.dtype() != out.dtype)) {
    return graph::invalid_argument("--outputs: '" + out.name + "' changes its type between batches (" + value.type_string() + ")");
  }
  out.dtype = value.dtype();
  out.example_shape = example_shape;
  const auto* bytes = static_cast<const std::byte*>(value.raw_data());
  out.bytes.insert(out.bytes.end(), bytes, bytes + value.byte_size());
  out.examples += examples;
  return graph::Status();
}

graph::Status write_outputs(const std::string& path, const std::vector<Gathered>& outputs) {
  std::vector<std::pair<std::string, runtime::data::NumpyValues>> arrays;
  for (const Gathered& g : outputs) {
    std::vector<int64_t> shape = {g.examples};
    shape.insert(shape.end(), g.example_shape.begin(), g.example_shape.end());
    arrays.emplace_back(g.name, runtime::data::NumpyValues{.type = runtime::data::element_type_of(g.dtype),
                                                           .shape = std::move(shape),
                                                           .data = std::span(g.bytes)});
  }
  if (path.ends_with(".npy")) {
    if (arrays.size() != 1) return graph::invalid_argument("--out '" + path + "': an .npy file holds one output; name an .npz for several");
    return runtime::data::write_npy(path, arrays[0].second);
  }
  return runtime::data::write_npz(path, arrays);
}

graph::Status predict(const PredictCommand& command, int64_t& examples) {
  if (!command.out.ends_with(".npy") && !command.out.ends_with(".npz")) {
    return graph::invalid_argument("--out '" + command.out + "' must name an .npy or .npz file");
  }
  if (command.outputs.empty()) return graph::invalid_argument("--outputs names no output");
  MIRRA_ASSIGN_OR_RETURN(serialization::Model model, serialization::load_model(command.model, ops::registry()));
  MIRRA_ASSIGN_OR_RETURN(const runtime::training::TrainingGraph signature, trainer_signature(model.signature));
  std::vector<graph::ValueRef> outputs;
  for (const std::string& name : command.outputs) {
    MIRRA_ASSIGN_OR_RETURN(const graph::ValueRef value, parse_output(model.graph, name));
    outputs.push_back(value);
  }
  // Batch normalisation predicts with its moving statistics.
  MIRRA_ASSIGN_OR_RETURN(outputs, ops::inference_copies(model.graph, ops::registry(), outputs));
  MIRRA_ASSIGN_OR_RETURN(const DataSpec spec, parse_data_shorthand(command.data, "--data"));
  MIRRA_ASSIGN_OR_RETURN(const auto data, program_dataset(spec, model.graph, signature, DataUse::eval,
                                                          {.batch_size = command.batch_size, .shuffle = false,
                                                           .threads = command.data_threads}));
  // Every placeholder the outputs need must be fed.
  std::vector<graph::NodeId> roots;
  for (const graph::ValueRef& output : outputs) roots.push_back(output.node);
  const std::vector<bool> needed = model.graph.needed_for(roots);
  const std::vector<std::string> fed = data.placeholders();
  for (const graph::Node& node : model.graph.nodes()) {
    if (needed[node.id] && node.op == "Placeholder" && std::find(fed.begin(), fed.end(), node.name) == fed.end()) {
      return graph::invalid_argument("the outputs need placeholder '" + node.name + "' (" + node.outputs[0].to_string() +
                                     "), which " + data.source().name() + " does not feed");
    }
  }
  const int64_t memory_limit = memory_limit_bytes(command.memory_limit);
  MIRRA_RETURN_IF_ERROR(check_memory(model.graph, ops::registry(), command.batch_size, memory_limit, roots));

  std::vector<graph::DeviceId> devices;
  for (const std::string& name : command.devices) {
    MIRRA_ASSIGN_OR_RETURN(const graph::DeviceId device, graph::DeviceId::parse(name));
    devices.push_back(device);
  }
  if (devices.empty()) devices = strategies::default_devices("one_device");
  std::vector<std::unique_ptr<runtime::Session>> sessions;
  for (const graph::DeviceId& device : devices) {
    sessions.push_back(std::make_unique<runtime::Session>(
        model.graph, ops::kernels(), runtime::SessionOptions{.threads = command.threads, .default_device = device,
                                                             .memory_limit = memory_limit}));
    MIRRA_RETURN_IF_ERROR(write_variables(*sessions.back(), model.weights, /*require_all=*/false, "model file '" + command.model + "'"));
  }

  std::vector<Gathered> gathered(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) gathered[i].name = command.outputs[i];
  auto epoch = data.epoch(0);
  const int64_t shares = static_cast<int64_t>(sessions.size());
  for (;;) {
    MIRRA_ASSIGN_OR_RETURN(std::optional<runtime::data::Batch> batch, epoch.next());
    if (!batch) break;
    // Each device its share of the batch's rows, in order, all at once.
    std::vector<graph::Expected<std::vector<runtime::Tensor>>> results(sessions.size(), std::vector<runtime::Tensor>());
    std::vector<int64_t> rows(sessions.size());
    std::vector<std::thread> threads;
    for (int64_t d = 0, first = 0; d < shares; ++d) {
      rows[static_cast<size_t>(d)] = runtime::participant_share(batch->size, shares, d);
      runtime::Feeds feeds;
      for (const auto& [placeholder, tensor] : batch->tensors) feeds.emplace(placeholder, tensor.rows(first, rows[static_cast<size_t>(d)]));
      first += rows[static_cast<size_t>(d)];
      if (rows[static_cast<size_t>(d)] == 0) continue;
      threads.emplace_back([&, d, feeds = std::move(feeds)] { results[static_cast<size_t>(d)] = sessions[static_cast<size_t>(d)]->run(feeds, outputs); });
    }
    for (std::thread& t : threads) t.join();
    for (size_t d = 0; d < sessions.size(); ++d) {
      if (rows[d] == 0) continue;
      MIRRA_RETURN_IF_ERROR(results[d].status());
      for (size_t i = 0; i < outputs.size(); ++i) MIRRA_RETURN_IF_ERROR(append(gathered[i], (*results[d])[i], rows[d]));
    }
    examples += batch->size;
  }
  return write_outputs(command.out, gathered);
}

}  // namespace

int run_predict(const PredictCommand& command) {
  int64_t examples = 0;
  if (const graph::Status status = predict(command, examples); !status.ok()) return report_error(status);
  if (command.json) {
    std::printf("%s\n", nlohmann::json{{"model", command.model}, {"examples", examples}, {"outputs", command.outputs},
                                       {"out", command.out}}.dump().c_str());
  } else {
    std::printf("wrote %zu output%s of %lld examples to %s\n", command.outputs.size(), command.outputs.size() == 1 ? "" : "s",
                static_cast<long long>(examples), command.out.c_str());
  }
  return 0;
}

}  // namespace mirra::runner
