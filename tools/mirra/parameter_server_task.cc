// mirra train --strategy parameter_server: this process's task of the cluster MIRRA_CLUSTER (or the
// config's "cluster") names.
// Every task builds the same cluster program from the model file and the config, cuts it by task
// (strategies::parameter_server_tasks) and runs its part, the parts exchanging values over gRPC
// (runtime::GrpcCommunicator). A server holds its variables, set from the model file. Synchronous:
// it runs a step whenever the workers do, as many as they train; a worker trains on its share of
// every global batch and reports the global batch's loss (worker 0 prints the progress and the
// summary). With a staleness bound k, the servers send the variables k steps ahead (before their
// first step, and from each step for the workers' step k later), each worker reports its own share's
// loss, and it receives what the servers' last k steps sent after its own last. Asynchronous: it
// serves each worker's steps as they come (serve_asynchronously), and each worker reports its own
// batches' loss; a lost worker ends its own loop only. Server 0 writes the checkpoints
// (checkpoint.dir: every checkpoint.every_steps, at each epoch's end and at the end), each server's
// variables gathered onto it, and at the end --save; with --resume, given to every task, server 0
// hands its latest checkpoint out and training goes on from its position. Server 0 sets a
// learning-rate schedule's rate before every step. With --eval, worker 0 evaluates the variables
// server 0 sends it where its epochs end; with training.logdir it writes TensorBoard's event files.
// Checkpoints, --resume, --eval and schedules are synchronous training's only. One replica per
// worker; what the other strategies offer beyond that is refused naming it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "runtime/collectives/grpc_communicator.h"
#include "serialization/file_io.h"
#include "strategies/parameter_server.h"
#include "serialization/checkpoint.h"
#include "tools/mirra/asynchronous_serving.h"
#include "tools/mirra/cluster_spec.h"
#include "tools/mirra/cluster_variables.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/interrupts.h"
#include "tools/mirra/metrics_json.h"
#include "tools/mirra/model_program.h"
#include "tools/mirra/program_data.h"
#include "tools/mirra/progress.h"
#include "tools/mirra/step_profile.h"
#include "tools/mirra/tensorboard_log.h"
#include "tools/mirra/trace_writer.h"
#include "tools/mirra/training_position.h"
#include "tools/mirra/variables_io.h"

namespace mirra::runner {

namespace {

// What this first version of the strategy does not do, by the flag or key that asks for it.
graph::Status refuse_unsupported(const TrainCommand& command) {
  const RunConfig& c = command.config;
  const auto no = [](const std::string& what, const std::string& instead = "") {
    return graph::invalid_argument("parameter_server does not offer " + what + " yet" + (instead.empty() ? "" : "; " + instead));
  };
  if (c.training.accumulation_steps > 1) return no("gradient accumulation");
  if (c.training.histogram_every > 0) return no("histograms in TensorBoard logs (training.histogram_every)");
  if (c.training.logdir_per_worker) return no("TensorBoard logs of every worker (training.logdir_per_worker)", "worker 0 writes the run's");
  if (c.training.cuda_graph) return no("captured steps (training.cuda_graph)");
  if (c.strategy.asynchronous) {  // what asks for every worker at one step
    const std::string sync = "train with \"update_mode\": \"sync\"";
    if (!c.checkpoint.dir.empty()) return no("checkpoints of asynchronous training (checkpoint.dir)", "save at the end (--save), or " + sync);
    if (command.resume) return no("--resume of asynchronous training", sync);
    if (command.eval) return no("--eval during asynchronous training", "evaluate what --save wrote (mirra eval), or " + sync);
    if (!c.training.schedule.is_constant()) return no("learning-rate schedules in asynchronous training", sync);
  }
  return graph::Status();
}

class ParameterServerTask {
 public:
  explicit ParameterServerTask(const TrainCommand& command) : command_(command), config_(command.config) {}
  graph::Status run();

 private:
  graph::Status serve();
  // A synchronous server's steps, from `start`: each one a step of every worker's, with the
  // checkpoints and evaluations due after it. The variables gathered after the last step, where a
  // checkpoint or an evaluation gathered them.
  using Gathered = std::optional<std::vector<serialization::NamedTensor>>;
  graph::Expected<Gathered> serve_steps(const serialization::TrainingPosition& start, int64_t steps, int64_t epoch_batches);
  // An asynchronous server's: `steps` of each worker, as they come (serve_asynchronously); a lost
  // worker is reported and the others go on, and the server fails only when every worker was lost.
  graph::Status serve_workers(int64_t steps);
  graph::Status train();
  // With --resume, every task: where training goes on from (server 0's latest checkpoint, handed
  // out); without, the start.
  graph::Expected<serialization::TrainingPosition> start_position();
  // Server 0's latest checkpoint, its position converted to this run's batches; nullopt for none.
  graph::Expected<std::optional<serialization::Checkpoint>> checkpoint_to_resume();
  // Every server: the variables gathered, and server 0 writes them as the checkpoint at `position`.
  graph::Expected<std::vector<serialization::NamedTensor>> save_checkpoint(const serialization::TrainingPosition& position);
  // With a learning-rate schedule, on the server holding the learning-rate variable: that variable,
  // whose value the server sets before every step (the servers' updates read it); else null.
  const graph::Node* scheduled_rate() const;
  // The global batches of an epoch of the training data (0 when its length is not known ahead).
  graph::Expected<int64_t> batches_per_epoch();
  // A worker's outputs (worker 0's progress, metrics file, event files and evaluations; each worker's
  // trace and profile), opened before its first step.
  graph::Status open_outputs(const DataSpec& spec);
  void on_step(const runtime::training::StepMetrics& step);
  void on_epoch(const runtime::training::EpochMetrics& epoch);
  void print_summary(double seconds) const;  // worker 0's
  // Worker 0 (with --eval): the test set's accuracy and loss with the variables server 0 sent after an epoch.
  graph::Expected<runtime::training::Evaluation> evaluate(runtime::Session& evaluator, const runtime::data::Dataset& test);
  int evaluating_task() const { return static_cast<int>(cluster_.servers.size()); }  // worker 0's
  double timeout_s() const { return config_.strategy.all_reduce.timeout_s; }
  bool checkpoints() const { return !config_.checkpoint.dir.empty(); }
  // Whether each worker reports its own batches (asynchronous, or synchronous with staleness) rather
  // than the global batch's.
  bool own_batches() const { return config_.strategy.asynchronous || config_.strategy.staleness > 0; }
  // With staleness k: the pulls (TaskProgram::pulls) run k times, a server's before its first step, a
  // worker's after its last.
  graph::Status run_pulls(const std::string& what);

  const TrainCommand& command_;
  const RunConfig& config_;
  ClusterSpec cluster_;
  serialization::Model model_;
  ModelProgram program_;
  strategies::TrainingProgram distributed_;
  strategies::TaskProgram part_;
  std::shared_ptr<runtime::GrpcCommunicator> transfers_;
  std::unique_ptr<runtime::Session> session_;
  std::unique_ptr<ClusterVariables> variables_;
  std::unique_ptr<serialization::CheckpointStore> store_;  // server 0's
  struct WorkerOutputs {
    std::unique_ptr<ProgressReporter> progress;
    std::ofstream metrics;
    std::unique_ptr<TensorBoardLog> tensorboard;
    std::unique_ptr<TraceWriter> trace;
    std::unique_ptr<StepProfile> profile;
    std::optional<runtime::data::Dataset> test;
    std::unique_ptr<runtime::Session> evaluator;  // a session of the one-replica program
    graph::Status evaluation_error;               // stops training after its epoch
    std::optional<runtime::training::Evaluation> last_evaluation;
    int64_t steps = 0, examples = 0;
    double last_loss = 0;
    std::chrono::steady_clock::time_point started;
  } out_;
};

graph::Status ParameterServerTask::run() {
  MIRRA_RETURN_IF_ERROR(check_run_config(config_));
  MIRRA_RETURN_IF_ERROR(refuse_unsupported(command_));
  auto cluster = find_cluster_spec(config_.cluster, "config");
  if (!cluster.ok()) {
    return graph::invalid_argument("parameter_server needs its cluster: " + cluster.status().message() +
                                   " (docs/strategies.md, \"parameter_server\")");
  }
  cluster_ = *cluster;
  if (command_.eval) {  // on every task, so that none waits for a worker 0 that cannot evaluate
    MIRRA_ASSIGN_OR_RETURN(const DataSpec train_spec, training_data_spec(config_));
    MIRRA_RETURN_IF_ERROR(evaluation_spec(config_.data.eval, train_spec).status());
  }
  MIRRA_ASSIGN_OR_RETURN(model_, serialization::load_model(command_.model, ops::registry()));
  strategies::StrategyConfig strategy_config = config_.strategy;
  strategy_config.cluster = {.servers = static_cast<int>(cluster_.servers.size()), .workers = static_cast<int>(cluster_.workers.size())};
  MIRRA_ASSIGN_OR_RETURN(const std::unique_ptr<strategies::Strategy> strategy, strategies::make_strategy(strategy_config));
  MIRRA_ASSIGN_OR_RETURN(program_, build_model_program(model_, model_program_options(config_.training, strategy_config.devices)));
  MIRRA_ASSIGN_OR_RETURN(distributed_, strategy->distribute(program_.program));
  MIRRA_ASSIGN_OR_RETURN(auto tasks, strategies::parameter_server_tasks(
                                         distributed_, {.implementation = "grpc", .timeout_ms = static_cast<int64_t>(timeout_s() * 1000)},
                                         {.asynchronous = config_.strategy.asynchronous, .staleness = config_.strategy.staleness}));
  const int task = cluster_.task();
  if (!tasks.contains(task)) return graph::internal_error("the cluster program has no part for " + cluster_.role());
  std::map<int, std::set<std::string, std::less<>>> held;
  for (const auto& [t, part] : tasks) held[t] = variable_names(part.graph);
  part_ = std::move(tasks.at(task));
  MIRRA_ASSIGN_OR_RETURN(transfers_, runtime::GrpcCommunicator::start({.addresses = cluster_.addresses(),
                                                                       .task = task,
                                                                       .token = cluster_.token,
                                                                       .fingerprint = strategies::program_fingerprint(distributed_.graph)}));
  session_ = std::make_unique<runtime::Session>(part_.graph, ops::kernels(),
                                                runtime::SessionOptions{.threads = config_.training.threads,
                                                                        .deterministic = config_.training.deterministic,
                                                                        .trace = !cluster_.is_server && (!command_.trace.empty() || command_.profile),
                                                                        .communicators = {transfers_},
                                                                        .task = task});
  variables_ = std::make_unique<ClusterVariables>(*transfers_, ClusterVariablesOptions{.task = task,
                                                                                       .servers = static_cast<int>(cluster_.servers.size()),
                                                                                       .timeout_s = timeout_s(),
                                                                                       .skip = program_.learning_rate_variable,
                                                                                       .held = std::move(held),
                                                                                       .cluster = &distributed_.graph});
  if (task == 0 && checkpoints()) {
    MIRRA_RETURN_IF_ERROR(prepare_checkpoint_directory(config_.checkpoint.dir));
    store_ = std::make_unique<serialization::CheckpointStore>(config_.checkpoint.dir, config_.checkpoint.keep);
  }
  return cluster_.is_server ? serve() : train();
}

graph::Expected<std::optional<serialization::Checkpoint>> ParameterServerTask::checkpoint_to_resume() {
  if (!store_) return graph::invalid_argument("--resume needs a checkpoint directory (--checkpoint-dir) on server 0");
  MIRRA_ASSIGN_OR_RETURN(std::optional<serialization::Checkpoint> latest, latest_checkpoint(*store_));
  if (!latest) return latest;
  latest->position = resumed_position(*latest, config_);
  if (!command_.json) print_resumed(*latest, latest->position);
  return latest;
}

graph::Expected<serialization::TrainingPosition> ParameterServerTask::start_position() {
  serialization::TrainingPosition start{.data_seed = config_.training.seed, .batch_size = config_.training.batch_size};
  if (!command_.resume) return start;
  graph::Expected<std::optional<serialization::Checkpoint>> latest = std::optional<serialization::Checkpoint>();
  if (cluster_.task() == 0) latest = checkpoint_to_resume();
  auto resumed = variables_->resume(*session_, latest);
  if (!resumed.ok()) return resumed.status().with_context(cluster_.role() + ", resuming");
  return resumed->value_or(start);
}

graph::Expected<std::vector<serialization::NamedTensor>> ParameterServerTask::save_checkpoint(
    const serialization::TrainingPosition& position) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<serialization::NamedTensor> values, variables_->gather(*session_));
  if (!store_) return values;
  const std::string not_saving = "not checkpointing step " + std::to_string(position.step);
  MIRRA_RETURN_IF_ERROR(check_values(values, not_saving));
  MIRRA_RETURN_IF_ERROR(store_->save({.position = position,
                                      .variables = values,
                                      .strategy = "parameter_server",
                                      .replicas = static_cast<int>(cluster_.workers.size())}));
  return values;
}

const graph::Node* ParameterServerTask::scheduled_rate() const {
  const std::optional<graph::NodeId> variable = part_.graph.find(program_.learning_rate_variable);
  return config_.training.schedule.is_constant() || !variable ? nullptr : &part_.graph.node(*variable);
}

graph::Expected<runtime::training::Evaluation> ParameterServerTask::evaluate(runtime::Session& evaluator,
                                                                             const runtime::data::Dataset& test) {
  MIRRA_ASSIGN_OR_RETURN(const std::vector<serialization::NamedTensor> values, variables_->receive_for_evaluation());
  MIRRA_RETURN_IF_ERROR(write_variables(evaluator, values, /*require_all=*/true, "server 0's variables", program_.learning_rate_variable));
  return runtime::training::Trainer(evaluator, program_.program.signature).evaluate(test);
}

graph::Expected<int64_t> ParameterServerTask::batches_per_epoch() {
  MIRRA_ASSIGN_OR_RETURN(const DataSpec spec, training_data_spec(config_));
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset data,
                         program_dataset(spec, program_.program.graph, program_.program.signature, DataUse::train,
                                         {.batch_size = config_.training.batch_size,
                                          .seed = config_.training.seed,
                                          .shard = 0,
                                          .shards = static_cast<int>(cluster_.workers.size()),
                                          .shard_policy = config_.data.shard}));
  return std::max<int64_t>(0, data.batches_per_epoch());
}

graph::Status ParameterServerTask::serve() {
  MIRRA_RETURN_IF_ERROR(serialization::check_writable_file(command_.save, "--save"));
  // This server's variables, from the model file.
  std::vector<serialization::NamedTensor> initial;
  const std::set<std::string, std::less<>> held = variable_names(part_.graph);
  for (const auto* list : {&model_.weights, &model_.signature.optimizer.state}) {
    for (const serialization::NamedTensor& value : *list) {
      if (held.contains(value.name) && value.name != program_.learning_rate_variable) initial.push_back(value);
    }
  }
  MIRRA_RETURN_IF_ERROR(write_variables(*session_, initial, /*require_all=*/false, "model file '" + command_.model + "'",
                                        program_.learning_rate_variable));
  MIRRA_ASSIGN_OR_RETURN(const serialization::TrainingPosition start, start_position());
  // As many steps as the workers take: to the config's, or to the end of its epochs of the data's
  // global batches.
  MIRRA_ASSIGN_OR_RETURN(const int64_t epoch_batches, batches_per_epoch());
  if (epoch_batches == 0 && (config_.training.steps <= 0 || checkpoints())) {
    return graph::invalid_argument(std::string("parameter_server: the training data's length is not known ahead; ") +
                                   (checkpoints() ? "checkpoints count epochs of it" : "give --steps"));
  }
  const int64_t steps = config_.training.steps > 0
                            ? config_.training.steps - start.step
                            : config_.training.epochs * epoch_batches - (start.epoch * epoch_batches + start.batch_in_epoch);
  if (!command_.json) std::printf("%s serving %lld steps on %s\n", cluster_.role().c_str(), static_cast<long long>(std::max<int64_t>(0, steps)),
                                  cluster_.addresses()[static_cast<size_t>(cluster_.task())].c_str());
  Gathered at_the_end;
  if (config_.strategy.asynchronous) {
    MIRRA_RETURN_IF_ERROR(serve_workers(steps));
  } else {
    MIRRA_ASSIGN_OR_RETURN(at_the_end, serve_steps(start, steps, epoch_batches));
  }
  if (!at_the_end) {
    MIRRA_ASSIGN_OR_RETURN(at_the_end, variables_->gather(*session_));
  }
  if (cluster_.task() != 0 || command_.save.empty()) return graph::Status();
  MIRRA_RETURN_IF_ERROR(check_values(*at_the_end, "not saving '" + command_.save + "'"));
  MIRRA_RETURN_IF_ERROR(serialization::save_model(trained_model(model_, program_.optimizer, std::move(*at_the_end)), command_.save));
  if (!command_.json) std::printf("saved the trained model to %s\n", command_.save.c_str());
  return graph::Status();
}

graph::Status ParameterServerTask::serve_workers(int64_t steps) {
  const std::vector<ServedWorker> served = serve_asynchronously(*session_, *transfers_, part_.loops, steps);
  const auto lost = [](const ServedWorker& worker) { return !worker.status.ok(); };
  for (const ServedWorker& worker : served) {
    if (!lost(worker)) continue;
    std::fprintf(stderr, "%s: lost worker %d (task %d) after %lld of its steps, went on with the others: %s\n", cluster_.role().c_str(),
                 worker.task - static_cast<int>(cluster_.servers.size()), worker.task, static_cast<long long>(worker.steps),
                 worker.status.message().c_str());
  }
  if (!served.empty() && std::all_of(served.begin(), served.end(), lost)) {
    return graph::unavailable(cluster_.role() + ": every worker was lost; the last: " + served.back().status.message());
  }
  return graph::Status();
}

graph::Status ParameterServerTask::run_pulls(const std::string& what) {
  if (part_.pulls == graph::kInvalidNode) return graph::Status();
  for (int i = 0; i < config_.strategy.staleness; ++i) {
    const graph::Status status = session_->run({}, {}, std::vector<graph::NodeId>{part_.pulls}).status();
    if (!status.ok()) {
      return status.with_context(cluster_.role() + ", " + what + " (" + std::to_string(i + 1) + " of " +
                                 std::to_string(config_.strategy.staleness) + ")");
    }
  }
  return graph::Status();
}

graph::Expected<ParameterServerTask::Gathered> ParameterServerTask::serve_steps(const serialization::TrainingPosition& start,
                                                                                int64_t steps, int64_t epoch_batches) {
  MIRRA_RETURN_IF_ERROR(run_pulls("sending the variables ahead of the first step"));
  serialization::TrainingPosition position = start;
  const graph::Node* rate_variable = scheduled_rate();
  for (int64_t step = 0; step < steps; ++step) {
    if (rate_variable != nullptr) {
      runtime::training::set_learning_rate(*session_, *rate_variable,
                                           config_.training.schedule.at(program_.optimizer.learning_rate, position.step));
    }
    const graph::Status status = session_->run({}, {}, std::vector<graph::NodeId>{part_.signature.train}).status();
    if (!status.ok()) return status.with_context(cluster_.role() + ", step " + std::to_string(position.step + 1));
    position = position_after_steps(start, step + 1, std::max<int64_t>(1, epoch_batches));
    // At the end of each epoch and of training, and every checkpoint.every_steps: the checkpoint;
    // where worker 0's trainer ends an epoch (at its end, or at the end of training): its evaluation.
    const bool last = step + 1 == steps, epoch_done = position.batch_in_epoch == 0;
    const int64_t every = config_.checkpoint.every_steps;
    const bool checkpoint_due = checkpoints() && (epoch_done || last || (every > 0 && position.step % every == 0));
    const bool evaluation_due = command_.eval && (epoch_done || last);
    if (!checkpoint_due && !evaluation_due) continue;
    MIRRA_ASSIGN_OR_RETURN(std::vector<serialization::NamedTensor> values,
                           checkpoint_due ? save_checkpoint(position) : variables_->gather(*session_));
    if (evaluation_due) MIRRA_RETURN_IF_ERROR(variables_->send_for_evaluation(values, evaluating_task()));
    if (last) return Gathered(std::move(values));
  }
  return Gathered();
}

graph::Status ParameterServerTask::train() {
  MIRRA_ASSIGN_OR_RETURN(const serialization::TrainingPosition start, start_position());
  MIRRA_ASSIGN_OR_RETURN(const DataSpec spec, training_data_spec(config_));
  MIRRA_ASSIGN_OR_RETURN(runtime::data::Dataset data,
                         program_dataset(spec, program_.program.graph, program_.program.signature, DataUse::train,
                                         {.batch_size = config_.training.batch_size,
                                          .seed = config_.training.seed,
                                          .threads = config_.data.threads,
                                          .shuffle_buffer = config_.data.shuffle_buffer,
                                          .shard = cluster_.index,
                                          .shards = static_cast<int>(cluster_.workers.size()),
                                          .shard_policy = config_.data.shard}));
  if (start.data_seed != data.options().seed) data = data.reseeded(start.data_seed);  // the checkpoint's
  MIRRA_RETURN_IF_ERROR(open_outputs(spec));
  runtime::training::Trainer trainer(
      *session_, part_.signature,
      {.epochs = config_.training.steps > 0 ? 0 : config_.training.epochs - start.epoch,
       .first_epoch = start.epoch,
       .first_batch = start.batch_in_epoch,
       .first_step = start.step,
       .max_steps = config_.training.steps,
       .own_batches = own_batches(),
       .base_learning_rate = program_.optimizer.learning_rate,
       .on_step = [this](const runtime::training::StepMetrics& step) { on_step(step); },
       .should_stop = [this] { return !out_.evaluation_error.ok(); },
       .on_epoch = [this](const runtime::training::EpochMetrics& epoch) { on_epoch(epoch); }});
  const bool finished = config_.training.steps > 0 ? start.step >= config_.training.steps : start.epoch >= config_.training.epochs;
  if (!finished) {
    const graph::Status fitted = trainer.fit(data).status();
    MIRRA_RETURN_IF_ERROR(out_.evaluation_error);
    MIRRA_RETURN_IF_ERROR(fitted);
  }
  MIRRA_RETURN_IF_ERROR(run_pulls("receiving the variables sent past the last step"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - out_.started).count();
  if (out_.tensorboard) MIRRA_RETURN_IF_ERROR(out_.tensorboard->close());
  if (out_.trace) {
    const std::string& path = command_.trace;
    MIRRA_RETURN_IF_ERROR(out_.trace->write(cluster_.workers.size() > 1 ? path + ".worker" + std::to_string(cluster_.index) : path));
  }
  if (cluster_.index == 0) print_summary(seconds);
  return graph::Status();
}

graph::Status ParameterServerTask::open_outputs(const DataSpec& spec) {
  const bool speaks = cluster_.index == 0;
  if (!command_.trace.empty()) {
    out_.trace = std::make_unique<TraceWriter>(session_->graph(), "none (each variable's server sums its gradients)");
  }
  if (command_.profile) out_.profile = std::make_unique<StepProfile>(session_->graph());
  if (speaks && command_.eval) {
    MIRRA_ASSIGN_OR_RETURN(const DataSpec eval_spec, evaluation_spec(config_.data.eval, spec));
    MIRRA_ASSIGN_OR_RETURN(out_.test, program_dataset(eval_spec, program_.program.graph, program_.program.signature, DataUse::eval,
                                                      {.batch_size = std::max<int64_t>(config_.training.batch_size, 500),
                                                       .shuffle = false,
                                                       .threads = config_.data.threads}));
    out_.evaluator = std::make_unique<runtime::Session>(program_.program.graph, ops::kernels(),
                                                        runtime::SessionOptions{.threads = config_.training.threads,
                                                                                .deterministic = config_.training.deterministic});
  }
  if (speaks && !config_.training.logdir.empty()) {
    MIRRA_ASSIGN_OR_RETURN(out_.tensorboard, TensorBoardLog::open(config_.training.logdir, session_->graph()));
    out_.tensorboard->write_graph();
    out_.tensorboard->write_config(run_config_json(config_));
  }
  if (!command_.metrics.empty() && (speaks || own_batches())) {  // each worker's own steps where it reports its own
    out_.metrics.open(command_.metrics);
    if (!out_.metrics) return graph::invalid_argument("cannot write metrics file '" + command_.metrics + "'");
  }
  const int workers = static_cast<int>(cluster_.workers.size());
  if (speaks && !command_.json) {
    const std::string mode = config_.strategy.asynchronous      ? "asynchronous"
                             : config_.strategy.staleness == 0 ? "synchronous"
                                                               : "synchronous, staleness " + std::to_string(config_.strategy.staleness);
    std::printf("training %s with parameter_server (%s) on %zu server%s and %d worker%s, global batch %lld\n", command_.model.c_str(),
                mode.c_str(), cluster_.servers.size(), cluster_.servers.size() == 1 ? "" : "s", workers, workers == 1 ? "" : "s",
                static_cast<long long>(config_.training.batch_size));
  }
  out_.progress = std::make_unique<ProgressReporter>(speaks ? stdout : nullptr, false,
                                                     config_.training.steps > 0 ? 0 : config_.training.epochs);
  out_.started = std::chrono::steady_clock::now();
  return graph::Status();
}

void ParameterServerTask::on_step(const runtime::training::StepMetrics& step) {
  ++out_.steps;
  out_.examples += step.examples;
  out_.last_loss = step.loss;
  out_.progress->on_step(step);
  const double rate = config_.training.schedule.at(program_.optimizer.learning_rate, step.step);  // server 0's
  if (out_.metrics.is_open()) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - out_.started).count();
    out_.metrics << step_line(step, rate, elapsed).dump() << '\n';
  }
  if (out_.tensorboard) out_.tensorboard->step(step, {}, {.learning_rate = rate});
  if (out_.profile) out_.profile->add_step(step, session_->last_timeline());
  if (out_.trace && !out_.trace->full()) {
    out_.trace->add_step(step, session_->last_timeline());
    if (out_.trace->full() && !out_.profile) session_->set_trace(false);  // the rest of the run needs no timelines
  }
}

void ParameterServerTask::on_epoch(const runtime::training::EpochMetrics& epoch) {
  runtime::training::EpochMetrics shown = epoch;
  if (out_.evaluator && out_.evaluation_error.ok()) {
    auto evaluation = evaluate(*out_.evaluator, *out_.test);
    if (evaluation.ok()) {
      shown.evaluation = out_.last_evaluation = *evaluation;
    } else {
      out_.evaluation_error = evaluation.status().with_context("evaluating after epoch " + std::to_string(epoch.epoch + 1));
    }
  }
  out_.progress->on_epoch(shown);
  if (out_.tensorboard) out_.tensorboard->epoch(shown);
}

void ParameterServerTask::print_summary(double seconds) const {
  const double rate = seconds > 0 ? static_cast<double>(out_.examples) / seconds : 0.0;
  const std::optional<runtime::training::Evaluation>& evaluation = out_.last_evaluation;
  if (!command_.json) {
    std::printf("trained %lld steps in %.1f s, this worker's %lld examples at %.0f examples/s, final loss %.4f",
                static_cast<long long>(out_.steps), seconds, static_cast<long long>(out_.examples), rate, out_.last_loss);
    if (evaluation && evaluation->accuracy) std::printf(", test accuracy %.4f", *evaluation->accuracy);
    if (evaluation && !evaluation->accuracy) std::printf(", test loss %.4f", evaluation->mean_loss);
    std::printf("\n");
    if (out_.profile) std::printf("%s", out_.profile->table().c_str());
    return;
  }
  nlohmann::json summary = {{"model", command_.model},
                            {"strategy", "parameter_server"},
                            {"update_mode", config_.strategy.asynchronous ? "async" : "sync"},
                            {"staleness", config_.strategy.staleness},
                            {"servers", cluster_.servers.size()},
                            {"workers", cluster_.workers.size()},
                            {"steps", out_.steps},
                            {"examples", out_.examples},
                            {"seconds", seconds},
                            {"examples_per_s", rate},
                            {"bytes_sent", transfers_->bytes_sent()},
                            {"bytes_received", transfers_->bytes_received()},
                            {"final_loss", out_.last_loss}};
  if (evaluation) {
    if (evaluation->accuracy) summary["test_accuracy"] = *evaluation->accuracy;
    summary["test_loss"] = evaluation->mean_loss;
  }
  if (out_.profile) summary["profile"] = out_.profile->json();
  std::printf("%s\n", summary.dump().c_str());
}

}  // namespace

int run_parameter_server_task(const TrainCommand& command) {
  ParameterServerTask task(command);
  const graph::Status status = task.run();
  if (!status.ok()) {
    if (command.json) std::printf("%s\n", nlohmann::json({{"model", command.model}, {"error", status.message()}}).dump().c_str());
    return report_error(status);
  }
  return interrupt_signal() != 0 ? 128 + interrupt_signal() : 0;
}

}  // namespace mirra::runner
