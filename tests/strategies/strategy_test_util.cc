// Strategy test helpers.
#include "tests/strategies/strategy_test_util.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "examples/models.h"  // dense()

namespace mirra::strategies::test {

TrainingProgram build_program(const std::string& model, const ops::Optimizer& optimizer,
                              const ops::MinimizeOptions& options) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/3);
  graph::ValueRef logits;
  if (model == "mlp") {
    // The benchmark MLP's architecture in float64: a ReLU whose input sits within float32 rounding of
    // zero turns one example's contribution on or off, and such flips would swamp the tolerance.
    auto images = ops::placeholder(b, "images", graph::DType::f64, {-1, 28, 28, 1});
    graph::ValueRef x = ops::reshape(b, images, {-1, 784});
    const int64_t widths[] = {784, 256, 128, 10};
    for (int layer = 0; layer < 3; ++layer) {
      auto scope = b.scope("fc" + std::to_string(layer + 1));
      auto w = ops::variable(b, "w", {widths[layer], widths[layer + 1]}, ops::Initializer::glorot_uniform(),
                             graph::DType::f64);
      auto bias = ops::variable(b, "b", {widths[layer + 1]}, ops::Initializer::zeros(), graph::DType::f64);
      x = ops::bias_add(b, ops::matmul(b, x, w), bias);
      if (layer < 2) x = ops::relu(b, x);
    }
    logits = x;
  } else if (model == "embedding") {
    // Each example's 4 ids looked up in a table of kEmbeddingRows x 16 rows, their mean, a dense layer
    // to 10 classes; in float64.
    auto ids = ops::placeholder(b, "ids", graph::DType::i64, {-1, 4});
    auto table = ops::variable(b, "embedding/table", {kEmbeddingRows, 16}, ops::Initializer::normal(0.5), graph::DType::f64);
    const graph::ValueRef pooled = ops::reduce_mean(b, ops::gather(b, table, ids), {1});
    auto scope = b.scope("logits");
    auto w = ops::variable(b, "w", {16, 10}, ops::Initializer::glorot_uniform(), graph::DType::f64);
    auto bias = ops::variable(b, "b", {10}, ops::Initializer::zeros(), graph::DType::f64);
    logits = ops::bias_add(b, ops::matmul(b, pooled, w), bias);
  } else {
    auto images = ops::placeholder(b, "images", graph::DType::f32, {-1, 8, 8, 1});
    auto filter = ops::variable(b, "conv/filter", {3, 3, 1, 4}, ops::Initializer::glorot_uniform());
    auto bias = ops::variable(b, "conv/b", {4}, ops::Initializer::constant(0.1));
    // padded_cnn pads as torchvision does, a Pad and then a VALID convolution.
    const graph::ValueRef convolved =
        model == "padded_cnn"
            ? ops::conv2d(b, ops::pad(b, images, {0, 0, 1, 1, 1, 1, 0, 0}), filter, {.padding = "VALID"})
            : ops::conv2d(b, images, filter, {.padding = "SAME"});
    auto x = ops::relu(b, ops::bias_add(b, convolved, bias));
    x = ops::reshape(b, ops::max_pool(b, x, {.ksize = {2, 2}, .strides = {2, 2}, .padding = "VALID"}), {-1, 4 * 4 * 4});
    logits = examples::dense(b, "logits", x, 4 * 4 * 4, 10, false);
  }
  const ops::ClassifierObjective objective = ops::classifier_objective(b, logits);
  auto train = ops::minimize(b, objective.loss, optimizer, options);
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.loss = objective.loss,
                       .correct = objective.correct,
                       .train = train->train,
                       .learning_rate = train->learning_rate};
  if (model == "embedding") program.signature.features = "ids";
  if (model == "padded_cnn") {  // the passes the runner's programs take: the padding folds into the convolution
    REQUIRE(ops::rewrite_for_training(program.graph, ops::registry(), ops::MixedPrecision::off, {},
                                      {train->train, objective.loss.node, objective.correct.node})
                .ok());
  }
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

std::vector<Batch> random_batches(const std::string& model, int64_t size, int count, uint64_t seed) {
  runtime::Random rng(seed);
  if (model == "embedding") {
    std::vector<Batch> batches;
    for (int i = 0; i < count; ++i) {
      std::vector<int64_t> ids(static_cast<size_t>(size * 4)), labels(static_cast<size_t>(size));
      for (int64_t& id : ids) id = static_cast<int64_t>(rng.below(kEmbeddingRows));
      for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(10));
      batches.push_back({runtime::Tensor::from<int64_t>({size, 4}, std::span<const int64_t>(ids)),
                         runtime::Tensor::from<int64_t>({size}, std::span<const int64_t>(labels))});
    }
    return batches;
  }
  const int64_t side = model == "mlp" ? 28 : 8;
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) {
    std::vector<double> pixels(static_cast<size_t>(size * side * side));
    for (double& p : pixels) p = rng.uniform();
    std::vector<int64_t> labels(static_cast<size_t>(size));
    for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(10));
    const runtime::TensorShape shape{size, side, side, 1};
    runtime::Tensor images = runtime::Tensor::from<double>(shape, std::span<const double>(pixels));
    if (model != "mlp") {
      const std::vector<float> narrow(pixels.begin(), pixels.end());
      images = runtime::Tensor::from<float>(shape, std::span<const float>(narrow));
    }
    batches.push_back({images, runtime::Tensor::from<int64_t>({size}, std::span<const int64_t>(labels))});
  }
  return batches;
}

bool is_slot(std::string_view name) {
  return name.ends_with("/m") || name.ends_with("/v") || name.ends_with("/momentum");
}

bool replicas_differ(const std::map<std::string, std::vector<double>>& variables,
                     const std::function<bool(std::string_view)>& compared) {
  for (const auto& [name, value] : variables) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica > 0 && compared(plain) && value != variables.at("replica_0/" + plain)) return true;
  }
  return false;
}

std::map<std::string, std::vector<double>> train_checking_replicas(const TrainingProgram& program,
                                                                   const std::vector<Batch>& batches, int replicas,
                                                                   bool check_slots, int logical_gpus_per_gpu) {
  runtime::Session session(program.graph, ops::kernels(), {.threads = 2, .logical_gpus_per_gpu = logical_gpus_per_gpu});
  for (size_t step = 0; step < batches.size(); ++step) {
    auto out = session.run(feeds(program, batches[step]), {program.signature.loss}, {program.signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    const auto values = float_variables(session);
    for (int r = 1; r < replicas; ++r) {
      for (const auto& [name, value] : values) {
        if (!name.starts_with("replica_0/") || (!check_slots && is_slot(name))) continue;
        const std::string copy = "replica_" + std::to_string(r) + name.substr(std::string("replica_0").size());
        if (values.at(copy) != value) FAIL("replica " << r << " of " << name << " differs after step " << step);
      }
    }
  }
  return float_variables(session);
}

std::vector<graph::DeviceId> devices_of(graph::DeviceKind kind, int n) {
  std::vector<graph::DeviceId> devices;
  for (int i = 0; i < n; ++i) devices.push_back({kind, i});
  return devices;
}

namespace {

template <class T>
runtime::Tensor join_values(const std::vector<runtime::Tensor>& parts) {
  std::vector<T> values;
  int64_t rows = 0;
  for (const runtime::Tensor& part : parts) {
    const std::span<const T> v = part.values<T>();
    values.insert(values.end(), v.begin(), v.end());
    rows += part.shape().dim(0);
  }
  runtime::TensorShape shape = parts.front().shape();
  shape.set_dim(0, rows);
  return runtime::Tensor::from<T>(shape, std::span<const T>(values));
}

}  // namespace

Batch join(const std::vector<Batch>& batches) {
  std::vector<runtime::Tensor> images, labels;
  for (const Batch& batch : batches) {
    images.push_back(batch.images);
    labels.push_back(batch.labels);
  }
  const graph::DType dtype = images.front().dtype();
  return {dtype == graph::DType::f64   ? join_values<double>(images)
          : dtype == graph::DType::i64 ? join_values<int64_t>(images)
                                       : join_values<float>(images),
          join_values<int64_t>(labels)};
}

std::map<std::string, std::vector<double>> float_variables(runtime::Session& session) {
  std::map<std::string, std::vector<double>> values;
  for (const std::string& name : session.variables().names()) {
    const auto value = session.read_variable(name);
    if (value->dtype() == graph::DType::f32) {
      const auto narrow = value->to_vector<float>();
      values[name] = std::vector<double>(narrow.begin(), narrow.end());
    } else if (value->dtype() == graph::DType::f64) {
      values[name] = value->to_vector<double>();
    }
  }
  return values;
}

double check_within(const std::string& name, const std::vector<double>& got, const std::vector<double>& want,
                    double relative, double scale_floor) {
  CAPTURE(name);
  REQUIRE(got.size() == want.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    diff = std::max(diff, std::abs(got[i] - want[i]));
  }
  CHECK(diff <= relative * std::max(scale, scale_floor));
  return diff;
}

void check_close(const std::string& name, const std::vector<double>& got, const std::vector<double>& want) {
  check_within(name, got, want, 1e-5);
}

void check_follows_within_bf16(const std::map<std::string, std::vector<double>>& got,
                               const std::map<std::string, std::vector<double>>& want) {
  double largest_difference = 0;
  for (const auto& [name, values] : want) {
    REQUIRE(got.contains(name));
    largest_difference = std::max(largest_difference, check_within(name, got.at(name), values, 1e-2));
  }
  CHECK(largest_difference > 0);
}

namespace {

TrainingProgram distribute_for(const TrainingProgram& program, const CaptureSetup& setup) {
  auto strategy = make_strategy(
      {.strategy = setup.strategy, .devices = setup.devices, .logical_gpus_per_gpu = setup.logical_per_device});
  REQUIRE_MESSAGE(strategy.ok(), strategy.status().to_string());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  return std::move(*distributed);
}

CapturedRun train_capturing(const TrainingProgram& program, const std::vector<Batch>& batches, const CaptureSetup& setup,
                            bool capture) {
  runtime::Session session(program.graph, ops::kernels(),
                           {.threads = 2,
                            .deterministic = setup.deterministic,
                            .logical_gpus_per_gpu = setup.logical_per_device,
                            .capture_steps = capture});
  const std::string rate = program.graph.node(program.signature.learning_rate.node).name;
  CapturedRun run;
  for (size_t step = 0; step < batches.size(); ++step) {
    if (setup.assign_rate) {
      session.assign_variable(rate, runtime::Tensor::scalar<float>(0.05f / (1.0f + 0.1f * static_cast<float>(step))));
    }
    auto out = session.run(feeds(program, batches[step]), {program.signature.loss}, {program.signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    run.losses.push_back((*out)[0].values<float>()[0]);
  }
  run.variables = float_variables(session);
  run.replays = session.replayed_steps();
  run.refusals = session.capture_refusals();
  return run;
}

}  // namespace

CapturedRun check_replays_match(const TrainingProgram& program, const std::vector<Batch>& batches,
                                const CaptureSetup& setup, double relative) {
  const TrainingProgram distributed = distribute_for(program, setup);
  const CapturedRun uncaptured = train_capturing(distributed, batches, setup, false);
  const CapturedRun captured = train_capturing(distributed, batches, setup, true);
  CHECK(uncaptured.replays == 0);
  REQUIRE(captured.variables.size() == uncaptured.variables.size());
  REQUIRE(captured.losses.size() == uncaptured.losses.size());
  if (relative == 0) {
    CHECK(std::memcmp(captured.losses.data(), uncaptured.losses.data(), captured.losses.size() * sizeof(float)) == 0);
    for (const auto& [name, values] : uncaptured.variables) {
      if (captured.variables.at(name) != values) FAIL_CHECK(name << " differs from training step by step");
    }
  } else {
    const std::vector<double> got(captured.losses.begin(), captured.losses.end());
    check_within("the losses", got, std::vector<double>(uncaptured.losses.begin(), uncaptured.losses.end()), relative);
    for (const auto& [name, values] : uncaptured.variables) check_within(name, captured.variables.at(name), values, relative);
  }
  return captured;
}

std::vector<double> reference_initial_value(const std::string& name, const graph::Shape& shape, int k) {
  const int64_t n = *shape.num_elements();
  double offset = 0, scale = 0;
  if (name.ends_with("gamma")) {
    offset = 1, scale = 0.1;
  } else if (name.ends_with("beta") || name.ends_with("/b") || name.ends_with("bias")) {
    scale = 0.1;
  } else {
    scale = std::sqrt(2.0 / static_cast<double>(n / shape.dims.back()));
  }
  std::vector<double> values;
  for (int64_t j = 0; j < n; ++j) values.push_back(offset + scale * std::sin(1.3 * static_cast<double>(j) + 0.7 * k));
  return values;
}

void assign_reference_weights(runtime::Session& session, const graph::Graph& g,
                              const std::map<std::string, graph::ValueRef>& trained) {
  int k = 0;
  for (const auto& [name, value] : trained) {
    const graph::Shape& shape = g.type(value).shape;
    const std::vector<double> initial = reference_initial_value(name, shape, k++);
    session.assign_variable(name, runtime::Tensor::from<double>(runtime::TensorShape(shape.dims), std::span<const double>(initial)));
  }
}

}  // namespace mirra::strategies::test
