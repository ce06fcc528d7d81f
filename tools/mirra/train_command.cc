// mirra train: model file -> training program -> strategy -> session; restores weights or the newest
// checkpoint, trains with the Trainer, checkpoints, reports progress, metrics, TensorBoard event files,
// a trace, a profile and a summary.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "ops/mixed_precision.h"
#include "ops/optimizer_ops.h"
#include "ops/registry.h"
#include "runtime/memory_estimate.h"
#include "serialization/checkpoint.h"
#include "serialization/file_io.h"
#include "runtime/device_kinds.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/metrics_json.h"
#include "tools/mirra/interrupts.h"
#include "tools/mirra/model_program.h"
#include "tools/mirra/program_data.h"
#include "tools/mirra/progress.h"
#include "tools/mirra/step_profile.h"
#include "tools/mirra/tensorboard_log.h"
#include "tools/mirra/trace_writer.h"
#include "tools/mirra/training_position.h"
#include "tools/mirra/variables_io.h"
#include "tools/mirra/workers.h"

namespace mirra::runner {

namespace {

using serialization::TrainingPosition;

// The gradients the update applies, in the order of the program's variables.
std::vector<graph::ValueRef> gradients_of(const strategies::TrainingProgram& program) {
  std::vector<graph::ValueRef> gradients;
  for (const auto& [variable, gradient] : program.variables_and_gradients) gradients.push_back(gradient);
  return gradients;
}

bool uses_cpu(const std::vector<graph::DeviceId>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const graph::DeviceId& d) {
    return runtime::device_kind_spec(d.kind).computes_on_host_cpu;
  });
}

// Problems that would otherwise surface only after training: unusable output paths, a model whose
// steps need a placeholder the training data does not feed.
graph::Status check_before_training(const TrainCommand& command, const strategies::TrainingProgram& program,
                                    const runtime::data::Dataset& train) {
  MIRRA_RETURN_IF_ERROR(serialization::check_writable_file(command.save, "--save"));
  MIRRA_RETURN_IF_ERROR(serialization::check_writable_file(command.trace, "--trace"));
  // The metrics are a stream: a pipe or a terminal may take them, so only their directory is checked.
  if (!command.metrics.empty() && !std::filesystem::exists(command.metrics)) {
    MIRRA_RETURN_IF_ERROR(serialization::check_writable_file(command.metrics, "--metrics"));
  }
  if (!command.config.checkpoint.dir.empty()) MIRRA_RETURN_IF_ERROR(prepare_checkpoint_directory(command.config.checkpoint.dir));
  if (const graph::Status fed = runtime::training::check_fed_by_batches(program.graph, program.signature, train.placeholders(),
                                                                        /*training=*/true);
      !fed.ok()) {
    return graph::invalid_argument("model '" + command.model + "': " + fed.message());
  }
  return graph::Status();
}

class TrainRun {
 public:
  explicit TrainRun(const TrainCommand& command) : command_(command), config_(command.config) {}

  graph::Status run();
  bool summary_printed() const { return summary_printed_; }
  // The workers of a multi-worker run (null otherwise), to end them all after a failure.
  runtime::WorkerCommunicator* workers() const { return workers_.get(); }

 private:
  // The training data (each worker's shard of every global batch) and, with --eval, the evaluation data.
  graph::Status open_data(int rank, int workers);
  graph::Status restore();
  // Every variable, whole, those synchronised on read synchronised first; in a multi-worker run a
  // collective call of every worker (gather_variables).
  graph::Expected<std::vector<serialization::NamedTensor>> read_all_variables();
  void note_metrics_error();  // a failed write to the metrics file: warn once, stop writing it
  // The TensorBoard log of this worker (worker 0's, or each worker's with logdir_per_worker), with the
  // graph and the config written; none without a log directory.
  graph::Status open_tensorboard(int rank, int workers);
  void log_step(const runtime::training::StepMetrics& step);
  // The rate a step ran with: the schedule's, or the constant one.
  double learning_rate_of(const runtime::training::StepMetrics& step) const {
    return config_.training.schedule.is_constant() ? program_.optimizer.learning_rate : step.learning_rate;
  }
  bool logs_to_tensorboard(int rank) const {
    return !config_.training.logdir.empty() && (rank == 0 || config_.training.logdir_per_worker);
  }
  // Whether the profile or the log needs each step's timeline (the log splits a step's time from it,
  // except where recording it would stop the steps from being replayed: cuda_graph); the trace needs
  // the first steps' too.
  bool timelines_beside_the_trace(int rank) const {
    return command_.profile || (logs_to_tensorboard(rank) && !config_.training.cuda_graph);
  }
  graph::Status save_checkpoint(const TrainingPosition& position);
  graph::Status save_model();
  void on_step(const runtime::training::StepMetrics& step);
  void print_summary(double seconds, const std::vector<runtime::training::EpochMetrics>& history);
  // fp16's loss scale after training, and how many of the `steps` run were skipped for overflow.
  struct LossScaleReport {
    float scale = 0;
    int64_t skipped_steps = 0;
  };
  std::optional<LossScaleReport> loss_scale_report(int64_t steps) const;
  int64_t applied_updates() const;  // the optimizer's iteration count
  ops::WorkerPart worker_part() const {
    return workers_ ? ops::WorkerPart{.worker = workers_->rank(), .workers = workers_->world_size()} : ops::WorkerPart{};
  }

  const TrainCommand& command_;
  const RunConfig& config_;
  serialization::Model model_;
  ModelProgram program_;
  strategies::TrainingProgram distributed_;
  std::unique_ptr<strategies::Strategy> strategy_;
  std::string all_reduce_plan_;  // where the gradients are summed, in words
  std::shared_ptr<runtime::WorkerCommunicator> workers_;  // outlives the session, which calls it
  std::unique_ptr<runtime::Session> session_;
  std::optional<runtime::data::Dataset> train_, test_;
  std::unique_ptr<serialization::CheckpointStore> store_;
  // The values restore() wrote: the checkpoint's (if any) first, so a search by name finds them
  // before the model file's they replaced.
  std::vector<serialization::NamedTensor> restored_;
  Worker0Saves saves_;  // what this run saves (worker 0's plans, which every worker takes part in)
  std::unique_ptr<ProgressReporter> progress_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<StepProfile> profile_;
  std::unique_ptr<TensorBoardLog> tensorboard_;
  std::ofstream metrics_;
  TrainingPosition start_, last_saved_{.step = -1};
  std::optional<TrainingPosition> position_;  // after the last step
  graph::Status step_error_;  // a failed periodic checkpoint: training stops after that step and reports it
  graph::Status metrics_error_;  // reported after training, which goes on without the metrics
  graph::Status tensorboard_error_;  // likewise for the event files
  bool summary_printed_ = false;
  int64_t skipped_records_ = 0;  // corrupt records the data sets left out (data.skip_corrupt)
  int64_t examples_ = 0;
  int64_t iterations_at_start_ = 0;  // the optimizer's count of applied updates when training began
  double last_loss_ = 0;
  std::chrono::steady_clock::time_point started_;
};

graph::Status TrainRun::run() {
  MIRRA_RETURN_IF_ERROR(check_run_config(config_));
  MIRRA_ASSIGN_OR_RETURN(model_, serialization::load_model(command_.model, ops::registry()));
  MIRRA_ASSIGN_OR_RETURN(strategy_, strategies::make_strategy(config_.strategy));
  MIRRA_ASSIGN_OR_RETURN(program_,
                         build_model_program(model_, model_program_options(config_.training, strategy_->config().devices)));
  all_reduce_plan_ = strategies::describe(strategy_->all_reduce_plan(), strategy_->config().devices);
  if (strategy_->across_workers()) {
    MIRRA_ASSIGN_OR_RETURN(workers_, runtime::open_mpi_communicator());
  }
  const int rank = workers_ ? workers_->rank() : 0, workers = workers_ ? workers_->world_size() : 1;
  MIRRA_RETURN_IF_ERROR(open_data(rank, workers));
  if (skipped_records_ > 0 && rank == 0) {
    std::fprintf(stderr, "mirra: warning: %lld corrupt record%s left out of the data (data.skip_corrupt)\n",
                 static_cast<long long>(skipped_records_), skipped_records_ == 1 ? "" : "s");
  }
  MIRRA_RETURN_IF_ERROR(check_before_training(command_, program_.program, *train_));
  program_.program.accumulate_gradients = config_.training.accumulation_steps > 1;
  MIRRA_ASSIGN_OR_RETURN(distributed_, strategy_->distribute(program_.program, worker_part()));
  MIRRA_RETURN_IF_ERROR(check_memory(distributed_.graph, *distributed_.ops, config_.training.batch_size,
                                     memory_limit_bytes(config_.training.memory_limit)));
  if (workers_) {
    MIRRA_RETURN_IF_ERROR(agree_with_worker_0(*workers_, config_, distributed_.graph));
    MIRRA_RETURN_IF_ERROR(workers_->prepare(collective_groups(distributed_.graph)));
  }
  std::vector<std::shared_ptr<runtime::Communicator>> communicators;
  if (workers_) communicators.push_back(workers_);
  session_ = std::make_unique<runtime::Session>(
      distributed_.graph, ops::kernels(),
      runtime::SessionOptions{.threads = config_.training.threads,
                              .deterministic = config_.training.deterministic,
                              .soft_placement = config_.training.soft_placement,
                              .allow_tf32 = config_.training.allow_tf32,
                              .logical_gpus_per_gpu = config_.strategy.logical_gpus_per_gpu,
                              .trace = !command_.trace.empty() || timelines_beside_the_trace(rank),
                              .capture_steps = config_.training.cuda_graph,
                              .memory_limit = memory_limit_bytes(config_.training.memory_limit),
                              .communicators = std::move(communicators)});
  const bool terminal = ::isatty(::fileno(stdout)) != 0;
  if ((!command_.json || terminal) && rank == 0) {
    const ops::MixedPrecision mixed = config_.training.mixed_precision;
    const std::string precision =
        mixed == ops::MixedPrecision::off ? ""
        : ", mixed precision " + std::string(ops::mixed_precision_name(mixed)) +
              (mixed == ops::MixedPrecision::fp16 ? " with dynamic loss scaling" : "");
    std::printf("training %s with %s (%zu replicas%s), global batch %lld%s\n", command_.model.c_str(),
                strategy_->describe().c_str(), strategy_->config().devices.size(),
                workers_ ? (" on each of " + std::to_string(workers) + " workers").c_str() : "",
                static_cast<long long>(config_.training.batch_size), precision.c_str());
    if (strategy_->config().devices.size() > 1) std::printf("all-reduce: %s\n", all_reduce_plan_.c_str());
    if (mixed == ops::MixedPrecision::bf16 && !ops::cpu_has_bf16_kernels() && uses_cpu(strategy_->config().devices)) {
      std::printf("note: oneDNN has no bf16 kernels for this CPU: its bf16 products are computed in f32 on the bf16 "
                  "operands (bf16's numerics, not its speed)\n");
    }
  }
  MIRRA_RETURN_IF_ERROR(restore());
  saves_ = {.checkpoints = store_ != nullptr, .model = !command_.save.empty()};
  if (workers_) {
    MIRRA_ASSIGN_OR_RETURN(saves_, take_worker_0_state(*workers_, *session_, start_, program_.learning_rate_variable,
                                                       config_.strategy.all_reduce.timeout_s, restored_, saves_));
  }
  iterations_at_start_ = applied_updates();
  if (start_.data_seed != train_->options().seed) train_ = train_->reseeded(start_.data_seed);  // the checkpoint's
  if (!command_.metrics.empty() && rank == 0) {
    metrics_.open(command_.metrics);
    if (!metrics_) return graph::invalid_argument("cannot write metrics file '" + command_.metrics + "'");
  }
  const InterruptibleScope interruptible;  // from here a signal stops training after its step, with a checkpoint
  if (!command_.trace.empty()) {
    trace_ = std::make_unique<TraceWriter>(session_->graph(), all_reduce_plan_);  // with its copies
    if (workers_) workers_->record_phases(true);
  }
  if (command_.profile) profile_ = std::make_unique<StepProfile>(session_->graph());
  MIRRA_RETURN_IF_ERROR(open_tensorboard(rank, workers));
  // Worker 0 speaks for a multi-worker run.
  progress_ = std::make_unique<ProgressReporter>(rank == 0 ? stdout : nullptr, terminal && !command_.json,
                                                 config_.training.steps > 0 ? 0 : config_.training.epochs);

  const int64_t epochs_left = config_.training.steps > 0 ? 0 : config_.training.epochs - start_.epoch;
  const bool finished = config_.training.steps > 0 ? start_.step >= config_.training.steps : epochs_left <= 0;
  if (interrupt_signal() != 0) {  // before the first step: nothing trained, nothing to save
    std::fprintf(stderr, "mirra: interrupted before the first step\n");
    return graph::Status();
  }
  std::vector<runtime::training::EpochMetrics> history;
  started_ = std::chrono::steady_clock::now();
  if (!finished) {
    runtime::training::Trainer trainer(
        *session_, distributed_.signature,
        {.epochs = epochs_left,
         .first_epoch = start_.epoch,
         .first_batch = start_.batch_in_epoch,
         .first_step = start_.step,
         .max_steps = config_.training.steps,
         .accumulation_steps = config_.training.accumulation_steps,
         .schedule = config_.training.schedule,
         .base_learning_rate = program_.optimizer.learning_rate,
         .watch = tensorboard_ ? gradients_of(distributed_) : std::vector<graph::ValueRef>(),
         .watch_every = tensorboard_ ? config_.training.histogram_every : 0,
         .on_step = [this](const runtime::training::StepMetrics& step) { on_step(step); },
         .should_stop = [this] { return interrupt_signal() != 0 || !step_error_.ok(); },
         .on_epoch = [this](const runtime::training::EpochMetrics& epoch) {
           progress_->on_epoch(epoch);
           if (tensorboard_) tensorboard_->epoch(epoch);
         }});
    auto fit = trainer.fit(*train_, test_ ? &*test_ : nullptr);
    MIRRA_RETURN_IF_ERROR(step_error_);
    MIRRA_ASSIGN_OR_RETURN(history, std::move(fit));
    if (metrics_.is_open()) metrics_.flush();
    note_metrics_error();
  } else if (!command_.json && rank == 0) {
    std::printf("nothing to train: the checkpoint is already at the end\n");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (position_ && !(*position_ == last_saved_)) MIRRA_RETURN_IF_ERROR(save_checkpoint(*position_));
  if (saves_.model) MIRRA_RETURN_IF_ERROR(save_model());
  if (tensorboard_) {
    tensorboard_error_ = tensorboard_->close();
    if (!tensorboard_error_.ok()) {
      std::fprintf(stderr, "mirra: warning: %s; the event files are incomplete\n", tensorboard_error_.message().c_str());
    }
  }
  if (trace_) MIRRA_RETURN_IF_ERROR(trace_->write(workers_ && workers > 1 ? command_.trace + ".worker" + std::to_string(rank) : command_.trace));
  if (rank == 0) print_summary(seconds, history);
  if (interrupt_signal() != 0) {
    std::fprintf(stderr, "mirra: interrupted after step %lld%s\n", static_cast<long long>(position_ ? position_->step : start_.step),
                 store_ ? "; the checkpoint is saved, --resume continues from it" : "");
  }
  // Training and every save went through; the metrics or event files are short, which a script must hear of.
  return metrics_error_.ok() ? tensorboard_error_ : metrics_error_;
}

graph::Status TrainRun::open_data(int rank, int workers) {
  const runtime::training::TrainingGraph& signature = program_.program.signature;
  MIRRA_ASSIGN_OR_RETURN(const DataSpec train_spec, training_data_spec(config_));
  MIRRA_ASSIGN_OR_RETURN(train_, program_dataset(train_spec, program_.program.graph, signature, DataUse::train,
                                                 {.batch_size = config_.training.batch_size,
                                                  .seed = config_.training.seed,
                                                  .threads = config_.data.threads,
                                                  .shuffle_buffer = config_.data.shuffle_buffer,
                                                  .shard = rank,
                                                  .shards = workers,
                                                  .shard_policy = config_.data.shard},
                                                 config_.training.augmentation,
                                                 {.skip = config_.data.skip_corrupt, .skipped = &skipped_records_}));
  if (!command_.eval) return graph::Status();
  MIRRA_ASSIGN_OR_RETURN(const DataSpec eval_spec, evaluation_spec(config_.data.eval, train_spec));
  MIRRA_ASSIGN_OR_RETURN(test_, program_dataset(eval_spec, program_.program.graph, signature, DataUse::eval,
                                                {.batch_size = std::max<int64_t>(config_.training.batch_size, 500),
                                                 .shuffle = false,
                                                 .threads = config_.data.threads,
                                                 .shard = rank,
                                                 .shards = workers},
                                                {}, {.skip = config_.data.skip_corrupt, .skipped = &skipped_records_}));
  return graph::Status();
}

void TrainRun::note_metrics_error() {
  if (!metrics_.is_open() || !metrics_.fail() || !metrics_error_.ok()) return;
  const int64_t step = position_ ? position_->step : start_.step;
  metrics_error_ = graph::invalid_argument("writing metrics file '" + command_.metrics + "' failed near step " +
                                           std::to_string(step) + " (" + std::strerror(errno) + "); it is incomplete");
  std::fprintf(stderr, "mirra: warning: %s; training goes on without it\n", metrics_error_.message().c_str());
  metrics_.close();
}

graph::Status TrainRun::restore() {
  std::vector<serialization::NamedTensor> initial = model_.weights;
  for (const auto& state : model_.signature.optimizer.state) initial.push_back(state);
  MIRRA_RETURN_IF_ERROR(write_variables(*session_, initial, /*require_all=*/false, "model file '" + command_.model + "'",
                                        program_.learning_rate_variable, worker_part()));
  restored_ = std::move(initial);
  start_ = {.data_seed = config_.training.seed, .batch_size = config_.training.batch_size};
  if (workers_ && workers_->rank() != 0) return graph::Status();  // worker 0's checkpoints; its state comes to all
  if (config_.checkpoint.dir.empty()) {
    if (command_.resume) return graph::invalid_argument("--resume needs a checkpoint directory (--checkpoint-dir)");
    return graph::Status();
  }
  store_ = std::make_unique<serialization::CheckpointStore>(config_.checkpoint.dir, config_.checkpoint.keep);
  if (!command_.resume) return graph::Status();
  MIRRA_ASSIGN_OR_RETURN(const std::optional<serialization::Checkpoint> latest, latest_checkpoint(*store_));
  if (!latest) return graph::Status();
  const serialization::Checkpoint& checkpoint = *latest;
  MIRRA_RETURN_IF_ERROR(write_variables(*session_, checkpoint.variables, /*require_all=*/true, "the checkpoint",
                                        program_.learning_rate_variable, worker_part()));
  restored_.insert(restored_.begin(), checkpoint.variables.begin(), checkpoint.variables.end());  // found first
  last_saved_ = checkpoint.position;
  start_ = resumed_position(checkpoint, config_);
  if (!command_.json) print_resumed(checkpoint, start_);
  return graph::Status();
}

void TrainRun::on_step(const runtime::training::StepMetrics& step) {
  examples_ += step.examples;
  last_loss_ = step.loss;
  position_ = position_after(step, start_);
  progress_->on_step(step);
  if (metrics_.is_open()) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    metrics_ << step_line(step, learning_rate_of(step), elapsed).dump() << '\n';
    note_metrics_error();
  }
  if (profile_) profile_->add_step(step, session_->last_timeline());
  if (tensorboard_) log_step(step);
  if (trace_ && !trace_->full()) {
    trace_->add_step(step, session_->last_timeline());
    if (workers_) trace_->add_collective_phases(workers_->take_phases());
    if (trace_->full()) {  // the rest of the run records timelines only for the profile and the log
      session_->set_trace(timelines_beside_the_trace(workers_ ? workers_->rank() : 0));
      if (workers_) workers_->record_phases(false);
    }
  }
  if (saves_.checkpoints && step_error_.ok()) {
    const bool epoch_end = position_->batch_in_epoch == 0;
    const int64_t every = config_.checkpoint.every_steps;
    if (epoch_end || (every > 0 && position_->step % every == 0)) step_error_ = save_checkpoint(*position_);
  }
}

graph::Status TrainRun::open_tensorboard(int rank, int workers) {
  if (!logs_to_tensorboard(rank)) return graph::Status();
  std::filesystem::path directory = config_.training.logdir;
  if (config_.training.logdir_per_worker && workers > 1) directory /= "worker_" + std::to_string(rank);
  MIRRA_ASSIGN_OR_RETURN(tensorboard_, TensorBoardLog::open(directory.string(), session_->graph()));
  tensorboard_->write_graph();
  tensorboard_->write_config(run_config_json(config_));
  return graph::Status();
}

void TrainRun::log_step(const runtime::training::StepMetrics& step) {
  TensorBoardLog::StepExtras extras{.learning_rate = learning_rate_of(step)};
  if (const std::optional<LossScaleReport> scaling = loss_scale_report(step.step + 1 - start_.step)) {
    extras.loss_scale = scaling->scale;
    extras.skipped_steps = scaling->skipped_steps;
  }
  tensorboard_->step(step, session_->last_timeline(), extras);
  if (step.watched.empty()) return;
  // The variables after the step's update, and the gradients it applied (replica 0's).
  std::vector<std::pair<std::string, runtime::Tensor>> values;
  const graph::Graph& g = distributed_.graph;
  for (size_t i = 0; i < distributed_.variables_and_gradients.size() && i < step.watched.size(); ++i) {
    const std::string& node = g.node(distributed_.variables_and_gradients[i].first.node).name;
    int replica = -1;
    const std::string name(strategies::replica_free_name(node, &replica));
    if (std::optional<runtime::Tensor> value = session_->read_variable(node)) values.emplace_back(name, std::move(*value));
    values.emplace_back(name + "/gradient", step.watched[i]);
  }
  tensorboard_->histograms(step.step + 1, std::move(values));
}

graph::Status TrainRun::save_checkpoint(const TrainingPosition& position) {
  if (!saves_.checkpoints) return graph::Status();
  serialization::Checkpoint checkpoint{.position = position,
                                       .strategy = strategy_->config().strategy,
                                       .replicas = static_cast<int>(strategy_->config().devices.size())};
  MIRRA_ASSIGN_OR_RETURN(checkpoint.variables, read_all_variables());
  if (!store_) {  // another worker than 0, which took part in gathering the values
    last_saved_ = position;
    return graph::Status();
  }
  MIRRA_RETURN_IF_ERROR(check_values(checkpoint.variables, "not checkpointing step " + std::to_string(position.step)));
  MIRRA_RETURN_IF_ERROR(store_->save(checkpoint));
  last_saved_ = position;
  return graph::Status();
}

graph::Expected<std::vector<serialization::NamedTensor>> TrainRun::read_all_variables() {
  MIRRA_RETURN_IF_ERROR(runtime::training::synchronize_on_read(*session_, distributed_.signature));
  if (!workers_) return read_variables(*session_, program_.learning_rate_variable);
  return gather_variables(*session_, program_.learning_rate_variable, *workers_,
                          runtime::deadline_after(std::chrono::milliseconds(
                              static_cast<int64_t>(config_.strategy.all_reduce.timeout_s * 1000))));
}

graph::Status TrainRun::save_model() {
  MIRRA_ASSIGN_OR_RETURN(std::vector<serialization::NamedTensor> values, read_all_variables());
  if (workers_ && workers_->rank() != 0) return graph::Status();  // it took part in gathering the values
  MIRRA_RETURN_IF_ERROR(check_values(values, "not saving '" + command_.save + "'"));
  MIRRA_RETURN_IF_ERROR(serialization::save_model(trained_model(model_, program_.optimizer, std::move(values)), command_.save));
  if (!command_.json) std::printf("saved the trained model to %s\n", command_.save.c_str());
  return graph::Status();
}

int64_t TrainRun::applied_updates() const {
  const std::optional<runtime::Tensor> count = session_->read_variable(std::string(ops::kIterationsVariable));
  return count ? count->values<int64_t>()[0] : 0;
}

std::optional<TrainRun::LossScaleReport> TrainRun::loss_scale_report(int64_t steps) const {
  if (config_.training.mixed_precision != ops::MixedPrecision::fp16) return std::nullopt;
  const std::string name(ops::kLossScaleVariable);
  std::optional<runtime::Tensor> scale = session_->read_variable(name);
  if (!scale) scale = session_->read_variable("replica_0/" + name);  // every replica holds the same
  if (!scale) return std::nullopt;
  return LossScaleReport{.scale = scale->values<float>()[0], .skipped_steps = steps - (applied_updates() - iterations_at_start_)};
}

void TrainRun::print_summary(double seconds, const std::vector<runtime::training::EpochMetrics>& history) {
  const int64_t steps = position_ ? position_->step - start_.step : 0;
  const std::optional<LossScaleReport> scaling = loss_scale_report(steps);
  const runtime::training::Evaluation* evaluation =
      history.empty() || !history.back().evaluation ? nullptr : &*history.back().evaluation;
  if (!command_.json) {
    std::printf("trained %lld steps (%lld examples) in %.1f s, %.0f examples/s, final loss %.4f", static_cast<long long>(steps),
                static_cast<long long>(examples_), seconds, seconds > 0 ? static_cast<double>(examples_) / seconds : 0.0,
                last_loss_);
    if (evaluation && evaluation->accuracy) std::printf(", test accuracy %.4f", *evaluation->accuracy);
    if (evaluation && !evaluation->accuracy) std::printf(", test loss %.4f", evaluation->mean_loss);
    if (scaling) {
      std::printf(", loss scale %g (%lld step%s skipped)", scaling->scale, static_cast<long long>(scaling->skipped_steps),
                  scaling->skipped_steps == 1 ? "" : "s");
    }
    std::printf("\n");
    if (profile_) std::printf("%s", profile_->table().c_str());
    return;
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const graph::DeviceId& d : strategy_->config().devices) devices.push_back(d.to_string());
  nlohmann::json summary = {{"model", command_.model},
                            {"strategy", strategy_->config().strategy},
                            {"devices", devices},
                            {"replicas", strategy_->config().strategy == "one_device" ? 1 : strategy_->config().devices.size()},
                            {"all_reduce", all_reduce_plan_},
                            {"shard_optimizer_state", strategy_->config().shard_optimizer_state},
                            {"optimizer_slot_bytes", ops::optimizer_slot_bytes(*session_)},
                            {"steps", steps},
                            {"total_steps", position_ ? position_->step : start_.step},
                            {"examples", examples_},
                            {"seconds", seconds},
                            {"examples_per_s", seconds > 0 ? static_cast<double>(examples_) / seconds : 0.0},
                            {"final_loss", last_loss_}};
  if (!history.empty() && !history.back().metrics.empty()) summary["metrics"] = metrics_json(history.back().metrics);
  if (evaluation) {
    if (evaluation->accuracy) summary["test_accuracy"] = *evaluation->accuracy;
    summary["test_loss"] = evaluation->mean_loss;
    if (!evaluation->metrics.empty()) summary["test_metrics"] = metrics_json(evaluation->metrics);
  }
  if (scaling) {
    summary["loss_scale"] = scaling->scale;
    summary["skipped_steps"] = scaling->skipped_steps;
  }
  if (config_.training.cuda_graph) {
    summary["replayed_steps"] = session_->replayed_steps();  // recorded steps' replays (evaluation's too)
    summary["not_replayed_because"] = session_->capture_refusals();
  }
  if (skipped_records_ > 0) summary["skipped_records"] = skipped_records_;
  if (!metrics_error_.ok()) summary["error"] = metrics_error_.message();
  if (profile_) summary["profile"] = profile_->json();
  std::printf("%s\n", summary.dump().c_str());
  summary_printed_ = true;
}

}  // namespace

graph::Status check_memory(const graph::Graph& graph, const graph::OpRegistry& schemas, int64_t batch_size,
                           int64_t limit_bytes, std::span<const graph::NodeId> roots) {
  MIRRA_ASSIGN_OR_RETURN(const runtime::MemoryEstimate estimate,
                         runtime::estimate_memory(graph, {.batch_size = batch_size, .schemas = &schemas}, roots));
  const graph::Status status = runtime::check_memory_budget(estimate, limit_bytes);
  if (status.ok()) return status;
  return graph::resource_exhausted(status.message() + " (--memory-limit raises the limit; a smaller --batch-size lowers the need)");
}

int report_error(const graph::Status& status) {
  if (graph::blames_input(status.code())) {
    std::fprintf(stderr, "mirra: error: %s\n", status.message().c_str());
    return 2;
  }
  std::fprintf(stderr, "mirra: error (%s): %s\n", std::string(graph::status_code_name(status.code())).c_str(),
               status.message().c_str());
  return 1;
}

int run_train(const TrainCommand& command) {
  if (command.config.strategy.strategy == "parameter_server") return run_parameter_server_task(command);
  TrainRun run(command);
  const graph::Status status = run.run();
  if (!status.ok()) {
    // --json promises a JSON object as the last line of stdout, also when the run fails.
    if (command.json && !run.summary_printed()) std::printf("%s\n", nlohmann::json({{"model", command.model}, {"error", status.message()}}).dump().c_str());
    const int code = report_error(status);
    // Other workers may wait on this one in a collective: end them all, now.
    if (run.workers() != nullptr && run.workers()->world_size() > 1) run.workers()->abort(code);
    return code;
  }
  return interrupt_signal() != 0 ? 128 + interrupt_signal() : 0;
}

}  // namespace mirra::runner
