// Trainer: fit (epochs, steps, schedule, metrics) and evaluate.
#include "runtime/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <span>

namespace mirra::runtime::training {

namespace {

using Clock = std::chrono::steady_clock;

graph::Expected<double> scalar_value(const Tensor& t, const char* what) {
  if (t.num_elements() != 1) return graph::invalid_argument(std::string(what) + " must be a scalar, not " + t.type_string());
  switch (t.dtype()) {
    case graph::DType::f32: return static_cast<double>(t.data<float>()[0]);
    case graph::DType::f64: return t.data<double>()[0];
    case graph::DType::i32: return static_cast<double>(t.data<int32_t>()[0]);
    case graph::DType::i64: return static_cast<double>(t.data<int64_t>()[0]);
    default: return graph::invalid_argument(std::string(what) + " must be numeric, not " + t.type_string());
  }
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int64_t nanoseconds(Clock::time_point t) { return t.time_since_epoch() / std::chrono::nanoseconds(1); }

// Sums over the batches of an epoch or an evaluation: the loss weighted by what it averages (the batch
// size, or the signature's loss weight: the tokens a mask keeps) and the correct count, so the means
// divide by what was seen (a partial batch weighs what it holds).
struct Totals {
  int64_t examples = 0;
  double loss_weight = 0, loss_sum = 0, correct_sum = 0;
  std::vector<double> metric_sums, metric_weights;  // per signature metric (a sum's weight unused)

  void add(const Totals& other) {
    examples += other.examples;
    loss_weight += other.loss_weight;
    loss_sum += other.loss_sum;
    correct_sum += other.correct_sum;
    metric_sums.resize(other.metric_sums.size());
    metric_weights.resize(other.metric_weights.size());
    for (size_t i = 0; i < other.metric_sums.size(); ++i) {
      metric_sums[i] += other.metric_sums[i];
      metric_weights[i] += other.metric_weights[i];
    }
  }
  double mean_loss() const { return loss_weight > 0 ? loss_sum / loss_weight : 0.0; }
  MetricValues metrics(const std::vector<TrainingMetric>& signature) const {
    MetricValues values;
    for (size_t i = 0; i < signature.size() && i < metric_sums.size(); ++i) {
      const MetricReduction reduction = signature[i].reduction;
      const double mean = metric_weights[i] > 0 ? metric_sums[i] / metric_weights[i] : 0.0;
      values.emplace_back(signature[i].name, reduction == MetricReduction::sum        ? metric_sums[i]
                                             : reduction == MetricReduction::exp_mean ? std::exp(mean)
                                                                                      : mean);
    }
    return values;
  }
  // The fraction classified correctly, where the signature counts them (`classified`).
  std::optional<double> accuracy(bool classified) const {
    if (!classified) return std::nullopt;
    return examples > 0 ? correct_sum / static_cast<double>(examples) : 0.0;
  }
};

// A batch whose tensors are on their way to the devices.
struct StagedBatch {
  StagedFeeds feeds;
  int64_t size = 0;  // of the global batch (a worker's batch is its shard of it), or with own_batches its own
};

graph::Expected<StagedBatch> stage_batch(const Session& session, const data::Batch& batch, bool own_batches) {
  MIRRA_ASSIGN_OR_RETURN(StagedFeeds feeds, session.stage(batch.feeds()));
  return StagedBatch{std::move(feeds), own_batches ? batch.size : batch.global_size};
}

// Runs one batch (with `targets`, an update) and adds its loss and correct count (where the
// signature has one) to `totals`; returns the batch's mean loss. Fetches `watch` too, into `watched`.
graph::Expected<double> run_batch(Session& session, const TrainingGraph& graph, StagedBatch batch,
                                  std::span<const graph::NodeId> targets, Totals& totals,
                                  std::span<const graph::ValueRef> watch = {}, std::vector<Tensor>* watched = nullptr) {
  std::vector<graph::ValueRef> fetches = graph.step_fetches();
  const size_t watched_from = fetches.size();
  fetches.insert(fetches.end(), watch.begin(), watch.end());
  MIRRA_ASSIGN_OR_RETURN(const std::vector<Tensor> out, session.run_staged(std::move(batch.feeds), fetches, targets));
  if (watched != nullptr) watched->assign(out.begin() + static_cast<ptrdiff_t>(watched_from), out.end());
  MIRRA_ASSIGN_OR_RETURN(const double loss, scalar_value(out[0], "the loss"));
  double correct = 0;
  size_t next = 1;
  if (graph.correct.valid()) {
    MIRRA_ASSIGN_OR_RETURN(correct, scalar_value(out[next++], "the correct count"));
  }
  const auto weighted = [&](Tensor value, double weight, double& sum, double& total) -> graph::Status {
    MIRRA_ASSIGN_OR_RETURN(const double v, scalar_value(value, "a metric"));
    total += weight;
    if (weight > 0) sum += v * weight;  // a batch of no weight has a mean of 0 / 0
    return graph::Status();
  };
  totals.metric_sums.resize(graph.metrics.size());
  totals.metric_weights.resize(graph.metrics.size());
  for (size_t i = 0; i < graph.metrics.size(); ++i) {
    const TrainingMetric& metric = graph.metrics[i];
    Tensor value = out[next++];
    double weight = static_cast<double>(batch.size);
    if (metric.weight.valid()) {
      MIRRA_ASSIGN_OR_RETURN(weight, scalar_value(out[next++], "a metric's weight"));
    }
    if (metric.reduction == MetricReduction::sum) weight = 1;
    MIRRA_RETURN_IF_ERROR(weighted(std::move(value), weight, totals.metric_sums[i], totals.metric_weights[i]));
  }
  double weight = static_cast<double>(batch.size);
  if (graph.loss_weight.valid()) {
    MIRRA_ASSIGN_OR_RETURN(weight, scalar_value(out[next], "the loss weight"));
  }
  totals.examples += batch.size;
  MIRRA_RETURN_IF_ERROR(weighted(out[0], weight, totals.loss_sum, totals.loss_weight));
  totals.correct_sum += correct;
  return loss;
}

}  // namespace

Trainer::Trainer(Session& session, TrainingGraph graph, TrainerOptions options)
    : session_(session), graph_(std::move(graph)), options_(std::move(options)), step_(options_.first_step) {
  base_learning_rate_ = options_.base_learning_rate;
}

void set_learning_rate(Session& session, const graph::Node& variable, double rate) {
  if (variable.outputs[0].dtype == graph::DType::f64) {
    session.assign_variable(variable.name, Tensor::scalar<double>(rate));
  } else {
    session.assign_variable(variable.name, Tensor::scalar<float>(static_cast<float>(rate)));
  }
}

std::vector<graph::ValueRef> TrainingGraph::step_fetches() const {
  std::vector<graph::ValueRef> fetches = {loss};
  if (correct.valid()) fetches.push_back(correct);
  for (const TrainingMetric& metric : metrics) {
    fetches.push_back(metric.value);
    if (metric.weight.valid()) fetches.push_back(metric.weight);
  }
  if (loss_weight.valid()) fetches.push_back(loss_weight);
  return fetches;
}

TrainingGraph TrainingGraph::for_evaluation() const {
  TrainingGraph evaluated = *this;
  if (inference) {
    evaluated.loss = inference->loss;
    evaluated.correct = inference->correct;
    evaluated.loss_weight = inference->loss_weight;
    evaluated.metrics = inference->metrics;
  }
  return evaluated;
}

graph::Status check_fed_by_batches(const graph::Graph& graph, const TrainingGraph& signature,
                                   const std::vector<std::string>& fed, bool training) {
  std::vector<graph::NodeId> roots;
  for (const graph::NodeId id : {signature.loss.node, signature.correct.node, training ? signature.train : graph::kInvalidNode,
                                 training ? signature.accumulate : graph::kInvalidNode}) {
    if (id < graph.size()) roots.push_back(id);
  }
  for (const TrainingMetric& metric : signature.metrics) {
    for (const graph::NodeId id : {metric.value.node, metric.weight.node}) {
      if (id < graph.size()) roots.push_back(id);
    }
  }
  const std::vector<bool> needed = graph.needed_for(roots);
  std::string unfed;
  int count = 0;
  for (const graph::Node& node : graph.nodes()) {
    if (!needed[node.id] || node.op != "Placeholder" || std::find(fed.begin(), fed.end(), node.name) != fed.end()) continue;
    unfed += (count++ == 0 ? "" : ", ") + ("'" + node.name + "' (" + node.outputs[0].to_string() + ")");
  }
  if (count == 0) return graph::Status();
  std::string fed_names;
  for (size_t i = 0; i < fed.size(); ++i) fed_names += (i == 0 ? "'" : ", '") + fed[i] + "'";
  return graph::invalid_argument("the " + std::string(training ? "training" : "evaluation") + " step needs placeholder" +
                                 (count > 1 ? "s " : " ") + unfed + ", which nothing feeds: the batches feed " +
                                 (fed.empty() ? std::string("nothing") : fed_names));
}

graph::Status synchronize_on_read(Session& session, const TrainingGraph& signature) {
  if (signature.synchronize == graph::kInvalidNode) return graph::Status();
  const graph::NodeId targets[] = {signature.synchronize};
  return session.run({}, {}, targets).status();
}

graph::Expected<std::vector<EpochMetrics>> Trainer::fit(const data::Dataset& train, const data::Dataset* test) {
  MIRRA_RETURN_IF_ERROR(check_fed_by_batches(session_.graph(), graph_, train.placeholders(), /*training=*/true));
  MIRRA_RETURN_IF_ERROR(options_.schedule.check());
  if (options_.epochs <= 0 && options_.max_steps <= 0) return graph::invalid_argument("train for at least one epoch or step");
  const bool scheduled = !options_.schedule.is_constant();
  if (scheduled && !base_learning_rate_) {
    if (graph_.learning_rate.node == graph::kInvalidNode) {
      return graph::invalid_argument("a learning-rate schedule needs the learning-rate variable");
    }
    // The variable's value before training is the schedule's base (fetching it also creates it).
    MIRRA_ASSIGN_OR_RETURN(const std::vector<Tensor> rate, session_.run({}, {graph_.learning_rate}));
    MIRRA_ASSIGN_OR_RETURN(base_learning_rate_, scalar_value(rate[0], "the learning rate"));
  }
  const int64_t k = options_.accumulation_steps;
  if (k < 1) return graph::invalid_argument("accumulation_steps must be at least 1, not " + std::to_string(k));
  if (k > 1 && graph_.accumulate == graph::kInvalidNode) {
    return graph::invalid_argument("accumulation_steps > 1 needs a program built with gradient accumulation");
  }
  const graph::NodeId apply_targets[] = {graph_.train};
  const graph::NodeId accumulate_targets[] = {graph_.accumulate};
  const int64_t epochs = options_.epochs > 0 ? options_.epochs : std::numeric_limits<int64_t>::max() / 2;
  std::vector<EpochMetrics> history;
  bool stopped = false;
  for (int64_t epoch = options_.first_epoch; epoch - options_.first_epoch < epochs; ++epoch) {
    if (stopped || (options_.max_steps > 0 && step_ >= options_.max_steps)) break;
    EpochMetrics metrics{.epoch = epoch};
    Totals totals;
    const auto epoch_start = Clock::now();
    int64_t batch_index = epoch == options_.first_epoch ? options_.first_batch : 0;
    auto batches = train.epoch(epoch, batch_index);
    const auto steps_left = [&] { return options_.max_steps <= 0 || step_ < options_.max_steps; };
    // The batch of the next step is fetched and staged before this step runs, so its copy into a
    // GPU overlaps this step.
    const auto next_batch = [&]() -> graph::Expected<std::optional<StagedBatch>> {
      MIRRA_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, batches.next());
      if (!batch) return std::optional<StagedBatch>();
      MIRRA_ASSIGN_OR_RETURN(StagedBatch staged, stage_batch(session_, *batch, options_.own_batches));
      return std::optional<StagedBatch>(std::move(staged));
    };
    auto data_start = Clock::now();  // since when this step waits for data
    std::optional<StagedBatch> batch;
    if (steps_left()) {
      MIRRA_ASSIGN_OR_RETURN(batch, next_batch());
    }
    int64_t micro = 0;  // batches of the step under way (gradient accumulation)
    Totals step_totals;  // theirs; added to the epoch's when the step updates
    Clock::time_point step_start, step_data_start;
    double rate = 0;
    for (;; ++batch_index) {
      if (!batch || !steps_left()) break;
      std::optional<StagedBatch> following;
      if (micro + 1 < k || options_.max_steps <= 0 || step_ + 1 < options_.max_steps) {
        MIRRA_ASSIGN_OR_RETURN(following, next_batch());
      }
      // The step updates on its k-th batch, or on the epoch's last.
      const bool update = micro + 1 == k || !following;
      if (micro == 0) {
        step_start = Clock::now();
        step_data_start = data_start;
        if (scheduled) {
          rate = options_.schedule.at(*base_learning_rate_, step_);
          set_learning_rate(session_, session_.graph().node(graph_.learning_rate.node), rate);
        }
      }
      const auto where = [&] {  // built only for an error, off the per-step path
        return "step " + std::to_string(step_ + 1) + " (epoch " + std::to_string(epoch + 1) + ", batch " +
               std::to_string(batch_index) + ")";
      };
      const bool watching = update && options_.watch_every > 0 && (step_ + 1) % options_.watch_every == 0;
      std::vector<Tensor> watched;
      auto ran = run_batch(session_, graph_, std::move(*batch), update ? apply_targets : accumulate_targets, step_totals,
                           watching ? std::span<const graph::ValueRef>(options_.watch) : std::span<const graph::ValueRef>(),
                           &watched);
      if (!ran.ok()) return ran.status().with_context(where());
      const double loss = *ran;
      if (!std::isfinite(loss)) {
        // The update of this step has used it (or will): the variables can no longer be trusted, so
        // training stops before anyone sees the step (on_step is where callers checkpoint).
        const graph::Node& node = session_.graph().node(graph_.loss.node);
        return graph::invalid_argument(where() + ": the loss '" + node.name + "' is " + (std::isnan(loss) ? "NaN" : "infinite") +
                                       "; training diverged (a lower learning rate may help)");
      }
      if (!update) {
        ++micro;
        batch = std::move(following);
        data_start = Clock::now();
        continue;
      }
      ++metrics.steps;
      totals.add(step_totals);
      if (options_.on_step) {
        const auto step_end = Clock::now();
        options_.on_step({.step = step_,
                          .epoch = epoch,
                          .batch = batch_index,
                          .batches_in_epoch = train.batches_per_epoch(),
                          .examples = step_totals.examples,
                          .loss = micro == 0 ? loss : step_totals.mean_loss(),  // one batch: its own loss
                          .metrics = step_totals.metrics(graph_.metrics),
                          .learning_rate = rate,
                          .examples_per_second = static_cast<double>(step_totals.examples) / seconds_since(step_start),
                          .data_start_ns = nanoseconds(step_data_start),
                          .step_start_ns = nanoseconds(step_start),
                          .step_end_ns = nanoseconds(step_end),
                          .watched = std::move(watched)});
      }
      micro = 0;
      step_totals = {};
      ++step_;
      if (options_.should_stop && options_.should_stop()) {
        stopped = true;
        break;
      }
      batch = std::move(following);
      data_start = Clock::now();
    }
    metrics.seconds = seconds_since(epoch_start);
    metrics.examples = totals.examples;
    metrics.mean_loss = totals.mean_loss();
    metrics.accuracy = totals.accuracy(graph_.correct.valid());
    metrics.metrics = totals.metrics(graph_.metrics);
    if (metrics.examples > 0) metrics.examples_per_second = static_cast<double>(metrics.examples) / metrics.seconds;
    if (test != nullptr && !stopped) {
      MIRRA_ASSIGN_OR_RETURN(metrics.evaluation, evaluate(*test));
    }
    if (options_.on_epoch) options_.on_epoch(metrics);
    const bool reached = options_.stop_at_accuracy > 0 && metrics.evaluation && metrics.evaluation->accuracy &&
                         *metrics.evaluation->accuracy >= options_.stop_at_accuracy;
    history.push_back(std::move(metrics));
    if (reached) break;
  }
  MIRRA_RETURN_IF_ERROR(synchronize_on_read(session_, graph_));
  return history;
}

graph::Expected<Evaluation> Trainer::evaluate(const data::Dataset& data) {
  const TrainingGraph evaluated = graph_.for_evaluation();
  MIRRA_RETURN_IF_ERROR(check_fed_by_batches(session_.graph(), evaluated, data.placeholders(), /*training=*/false));
  MIRRA_RETURN_IF_ERROR(synchronize_on_read(session_, graph_));
  Totals totals;
  auto batches = data.epoch(0);
  for (;;) {
    MIRRA_ASSIGN_OR_RETURN(std::optional<data::Batch> batch, batches.next());
    if (!batch) break;
    MIRRA_ASSIGN_OR_RETURN(StagedBatch staged, stage_batch(session_, *batch, options_.own_batches));
    MIRRA_RETURN_IF_ERROR(run_batch(session_, evaluated, std::move(staged), {}, totals).status());
  }
  return Evaluation{.examples = totals.examples,
                    .accuracy = totals.accuracy(evaluated.correct.valid()),
                    .mean_loss = totals.mean_loss(),
                    .metrics = totals.metrics(evaluated.metrics)};
}

}  // namespace mirra::runtime::training
