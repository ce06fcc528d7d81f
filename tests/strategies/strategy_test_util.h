// Helpers for strategy tests: one-replica training programs for the MLP and a small CNN, fixed random
// batches, and running steps through a Session.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ops/ops.h"
#include "runtime/random.h"
#include "runtime/session.h"
#include "strategies/strategy.h"

namespace mirra::strategies::test {

// "mlp": the benchmark MLP's architecture (784-256-128-10, ReLU) in float64 on [?, 28, 28, 1];
// "small_cnn": conv 3x3x4 + ReLU, max-pool 2x2, dense 10 in float32 on [?, 8, 8, 1]. Classifier
// objective and minimize() with `optimizer` and `options`. "padded_cnn": small_cnn with its padding a Pad
// before a VALID convolution (as torchvision pads), after the training passes (which fold it into
// the convolution). "embedding": 4 ids per example ("ids", i64 [?, 4]) looked up in a table of
// kEmbeddingRows x 16, averaged, and a dense layer to 10 classes, in float64.
inline constexpr int64_t kEmbeddingRows = 100'000;
TrainingProgram build_program(const std::string& model, const ops::Optimizer& optimizer,
                              const ops::MinimizeOptions& options = {});

struct Batch {
  runtime::Tensor images, labels;  // images: the features (the embedding model's ids)
};
// Deterministic batches of `size` examples for `model`'s input shape.
std::vector<Batch> random_batches(const std::string& model, int64_t size, int count, uint64_t seed);

// Devices kind:0 .. kind:n-1.
std::vector<graph::DeviceId> devices_of(graph::DeviceKind kind, int n);

// The batches joined along the batch dimension, in order.
Batch join(const std::vector<Batch>& batches);

inline runtime::Feeds feeds(const TrainingProgram& program, const Batch& batch) {
  return {{program.signature.features, batch.images}, {program.signature.labels, batch.labels}};
}

// Every f32 or f64 variable of a session by name, as doubles (copied from device memory).
std::map<std::string, std::vector<double>> float_variables(runtime::Session& session);

// Whether a variable, by name, is an optimizer slot (momentum; Adam's m and v).
bool is_slot(std::string_view name);

// Whether some replica's copy of a variable whose replica-free name `compared` accepts differs from
// replica 0's, in `variables` (float_variables' map).
bool replicas_differ(const std::map<std::string, std::vector<double>>& variables,
                     const std::function<bool(std::string_view)>& compared);

// Runs the train target on each batch and returns the session's float variables; with `replicas` > 1,
// checks after every step that each replica's copy of every variable is bitwise equal to replica 0's
// (of the slots too, with `check_slots`: sharded slots hold different shares). The session splits
// each GPU into `logical_gpus_per_gpu` devices.
std::map<std::string, std::vector<double>> train_checking_replicas(const TrainingProgram& program,
                                                                   const std::vector<Batch>& batches, int replicas,
                                                                   bool check_slots, int logical_gpus_per_gpu = 1);

// Training with steps recorded once and replayed (SessionOptions::capture_steps) against training step
// by step: the same program under `strategy` over `devices`.
struct CaptureSetup {
  std::string strategy = "one_device";
  std::vector<graph::DeviceId> devices = {{graph::DeviceKind::cpu_async, 0}};
  int logical_per_device = 1;
  bool deterministic = false;
  bool assign_rate = false;  // a decaying learning rate assigned before every step
};
struct CapturedRun {
  std::map<std::string, std::vector<double>> variables;
  std::vector<float> losses;
  int64_t replays = 0;
  std::vector<std::string> refusals;
};
// Trains with capture and without; checks that the losses and every variable agree (bit for bit when
// `relative` is 0, else within it as check_within does); returns the run with capture.
CapturedRun check_replays_match(const TrainingProgram& program, const std::vector<Batch>& batches,
                                const CaptureSetup& setup, double relative = 0);

// The PyTorch reference scripts' weights (tests/strategies/reference/reference_weights.py): element j
// of the k-th trained variable (by sorted name) is offset + scale * sin(1.3 j + 0.7 k), with (1, 0.1)
// for a gamma, (0, 0.1) for a beta or a bias, (0, sqrt(2 / fan_in)) for the rest.
std::vector<double> reference_initial_value(const std::string& name, const graph::Shape& shape, int k);
// Assigns each of `trained` (variables of `g` by name, in sorted order) its reference_initial_value.
void assign_reference_weights(runtime::Session& session, const graph::Graph& g,
                              const std::map<std::string, graph::ValueRef>& trained);

// Checks max |got - want| <= relative * max(max |want|, scale_floor) over one variable's elements (the
// floor for a value that is zero but for rounding); returns max |got - want|.
double check_within(const std::string& name, const std::vector<double>& got, const std::vector<double>& want,
                    double relative, double scale_floor = 1e-30);
// check_within 1e-5.
void check_close(const std::string& name, const std::vector<double>& got, const std::vector<double>& want);

// Checks that `got`, trained with bf16 all-reduce, follows `want`, trained without, by name: each
// variable within 1e-2 of its largest element (bf16 keeps 8 bits of each gradient), and that some
// variable differs (the gradients were rounded).
void check_follows_within_bf16(const std::map<std::string, std::vector<double>>& got,
                               const std::map<std::string, std::vector<double>>& want);

}  // namespace mirra::strategies::test
