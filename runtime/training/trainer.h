// Trainer: the training loop over a Session whose graph has a loss, a train target and, for a
// classifier, a count of correct predictions (ops::minimize and ops::classifier_objective build them).
// It feeds batches from a Dataset (staging each batch to the devices while the step before it runs),
// sets the learning rate of each step from its schedule, reports every step (loss, examples/s) and
// every epoch (mean loss, accuracy, metrics, throughput, and an evaluation on held-out data). A batch
// the data set cannot read or convert ends training with its error.
//
//   training::Trainer trainer(session, {.loss = objective.loss, .correct = objective.correct,
//                                       .train = train_op.train, .learning_rate = train_op.learning_rate},
//                             {.epochs = 5});
//   auto history = trainer.fit(train_data, &test_data);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/node.h"
#include "runtime/data/dataset.h"
#include "runtime/session.h"
#include "runtime/training/learning_rate_schedule.h"

namespace mirra::runtime::training {

// How a metric's values combine across replicas, workers and the batches of an epoch: summed (a
// count), or averaged as the loss is, over the elements of its ReduceMean over the batch or over a
// declared weight its sum is divided by (Keras's Mean metrics: a mean absolute error, a token
// accuracy); exp_mean averages so and reports the mean's exponential (a language model's perplexity,
// the exponential of its mean cross-entropy per token, which no mean of per-batch perplexities gives).
enum class MetricReduction { sum, mean, exp_mean };

// A figure reported besides the loss and accuracy.
struct TrainingMetric {
  std::string name;
  graph::ValueRef value;  // scalar, computed from the batch
  MetricReduction reduction = MetricReduction::mean;
  // With mean: what it averages over, as TrainingGraph::loss_weight for the loss (invalid: the
  // elements of its ReduceMean; the epoch then weighs each batch by its examples).
  graph::ValueRef weight;
  friend bool operator==(const TrainingMetric&, const TrainingMetric&) = default;
};

// A placeholder that carries the batch, and the axis it carries it along: 0 for [batch, ...], 1 for a
// time-major sequence [time, batch, ...].
struct BatchInput {
  std::string name;
  int64_t axis = 0;
  friend bool operator==(const BatchInput&, const BatchInput&) = default;
};

// What an evaluation fetches instead of the training values when ops of the graph compute
// differently in inference (batch normalisation: the moving statistics instead of the batch's): the
// same loss, correct count, loss weight and metrics, in inference mode (ops/inference_mode.h).
struct InferenceValues {
  graph::ValueRef loss, correct, loss_weight;
  std::vector<TrainingMetric> metrics;
};

struct TrainingGraph {
  std::string features = "images";  // the placeholders of the examples and of their labels (the batches
  std::string labels = "labels";    // feed these, and may feed others)
  // The placeholders that carry the batch, which a replicating strategy splits between its replicas
  // along their axes (features among them); every other placeholder is fed whole to every replica.
  // Empty: every placeholder whose dim 0 is unknown, along dim 0.
  std::vector<BatchInput> batch_inputs;
  graph::ValueRef loss;                          // scalar: the batch's mean loss
  // What the loss averages over. Invalid (the default): the elements of its ReduceMean over the batch
  // (the examples, or the examples' tokens). Else a scalar count computed from the batch alone that
  // the loss's sum over the batch is divided by (the tokens a mask keeps: a masked language model's
  // loss, Div(ReduceSum(losses * mask), ReduceSum(mask))); a replicating strategy then divides every
  // replica's sum by the count over the whole batch.
  graph::ValueRef loss_weight;
  graph::ValueRef correct;  // scalar: correctly classified examples in the batch (invalid: no accuracy, a regression)
  std::vector<TrainingMetric> metrics;           // reported too, each by name
  graph::NodeId train = graph::kInvalidNode;     // target: one update
  graph::ValueRef learning_rate;                 // the variable a schedule writes (only needed with one)
  // Target: add a micro-batch's gradients to the accumulators, no update (only with accumulation,
  // strategies::TrainingProgram::accumulate_gradients).
  graph::NodeId accumulate = graph::kInvalidNode;
  // Target: set every replica's copy of each variable synchronised on read (ops::VariableSynchronization:
  // batch normalisation's moving statistics, which each replica averages on its own during training)
  // to the replicas' mean, across workers too (a collective call of every worker). Whatever reads
  // such variables from outside the steps runs it first: the trainer before each evaluation and at
  // the end of fit, checkpoints and model files before they read. Invalid: nothing to combine.
  graph::NodeId synchronize = graph::kInvalidNode;
  // Absent: evaluation fetches the training values (no op of the graph has an inference mode).
  std::optional<InferenceValues> inference;

  // This signature with the inference values in place of the training ones, where it has them.
  TrainingGraph for_evaluation() const;
  // What each step fetches, in this order: the loss, the correct count where there is one, each
  // metric's value and its weight where one is declared, then the loss's weight where there is one.
  std::vector<graph::ValueRef> step_fetches() const;
};

// Whether the placeholders the batches feed (`fed`) are every placeholder the steps need: those the
// loss, correct count and metrics read, and with `training` those of the train and accumulate targets
// too. An invalid_argument error names each other one with its type, so a program that could not run
// its first step is refused before it starts.
graph::Status check_fed_by_batches(const graph::Graph& graph, const TrainingGraph& signature,
                                   const std::vector<std::string>& fed, bool training);

// Runs the signature's synchronize target where it has one: every replica's copy of each variable
// synchronised on read then holds the replicas' mean. A collective call of every worker.
graph::Status synchronize_on_read(Session& session, const TrainingGraph& signature);

struct StepMetrics {
  int64_t step = 0;  // counted from 0 over the whole training (from first_step when resumed)
  int64_t epoch = 0;
  int64_t batch = 0;            // index in its epoch of the step's (last) batch
  int64_t batches_in_epoch = 0;
  int64_t examples = 0;         // of the step's batches
  double loss = 0;              // their mean loss
  std::vector<std::pair<std::string, double>> metrics;  // the signature's, over the step's batches
  double learning_rate = 0;  // 0 when the trainer has no schedule
  double examples_per_second = 0;
  // steady_clock nanoseconds: waiting for data (the next step's batch, fetched from the input
  // pipeline and staged to the devices before this step runs), then the step itself.
  int64_t data_start_ns = 0, step_start_ns = 0, step_end_ns = 0;
  // On the steps TrainerOptions::watch_every picks, the watched values as the step computed them
  // (host copies, in TrainerOptions::watch's order); empty on the others.
  std::vector<Tensor> watched;
};

// The signature's metrics over an epoch or an evaluation, by name: sums summed, means weighted by what
// they average over.
using MetricValues = std::vector<std::pair<std::string, double>>;

struct Evaluation {
  int64_t examples = 0;
  std::optional<double> accuracy;  // where the signature counts correct predictions (a classifier)
  double mean_loss = 0;  // over examples, so a partial last batch weighs what it holds
  MetricValues metrics;
};

struct EpochMetrics {
  int64_t epoch = 0;
  int64_t steps = 0;
  int64_t examples = 0;
  double mean_loss = 0;
  std::optional<double> accuracy;  // as Evaluation's
  double seconds = 0;
  double examples_per_second = 0;
  MetricValues metrics;
  std::optional<Evaluation> evaluation;
};

struct TrainerOptions {
  int64_t epochs = 1;
  // Where to resume: the epoch (which also picks the shuffle), the batch within it, and the count of
  // steps already taken (for max_steps and the schedule).
  int64_t first_epoch = 0;
  int64_t first_batch = 0;
  int64_t first_step = 0;
  int64_t max_steps = 0;  // > 0: stop after this many steps in all, mid-epoch if need be
  // A worker's shard of each global batch is a batch of its own, whose loss and accuracy its signature
  // reports (an asynchronous parameter-server worker): its examples are counted and weigh, not the
  // global batch's.
  bool own_batches = false;
  // Micro-batches per step (gradient accumulation; > 1 needs TrainingGraph::accumulate): each step
  // runs the accumulate target on k - 1 batches and the train target on the k-th, which updates once
  // with the gradient of the mean loss over all k. An epoch's last step takes the batches that are
  // left. Steps, max_steps, the schedule and on_step count updates; positions count batches.
  int64_t accumulation_steps = 1;
  double stop_at_accuracy = 0;  // > 0: stop after the first epoch whose evaluation reaches it (classifiers)
  LearningRateSchedule schedule;
  // The rate the schedule scales; unset: the learning-rate variable's value before training.
  std::optional<double> base_learning_rate;
  // Values fetched with the update of every step whose number (counted from 1) is a multiple of
  // watch_every (0: none), for on_step (StepMetrics::watched): the gradients a log bins, say.
  std::vector<graph::ValueRef> watch;
  int64_t watch_every = 0;
  std::function<void(const StepMetrics&)> on_step;
  // Checked after every step: true stops training there (fit returns what it has so far).
  std::function<bool()> should_stop;
  std::function<void(const EpochMetrics&)> on_epoch;
};

// Sets the learning-rate `variable` (an f32 or f64 scalar Variable of the session's graph) to `rate`.
void set_learning_rate(Session& session, const graph::Node& variable, double rate);

class Trainer {
 public:
  Trainer(Session& session, TrainingGraph graph, TrainerOptions options = {});

  // Trains for the configured epochs (or steps), evaluating on `test` after each epoch when given.
  // A non-finite loss ends training with an error naming the step, before on_step sees that step.
  // The variables synchronised on read are synchronised at the end (synchronize_on_read).
  graph::Expected<std::vector<EpochMetrics>> fit(const data::Dataset& train, const data::Dataset* test = nullptr);
  // Accuracy and mean loss over every example of `data`, without updating anything but the variables
  // synchronised on read, which it synchronises first.
  graph::Expected<Evaluation> evaluate(const data::Dataset& data);

  // Steps taken, counting from first_step.
  int64_t steps_taken() const { return step_; }

 private:
  Session& session_;
  TrainingGraph graph_;
  TrainerOptions options_;
  int64_t step_ = 0;
  std::optional<double> base_learning_rate_;
};

}  // namespace mirra::runtime::training
