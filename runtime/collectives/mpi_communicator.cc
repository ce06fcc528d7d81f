// The WorkerCommunicator over MPI. MPI runs in MPI_THREAD_SERIALIZED mode, and after start-up one
// thread calls it: the communication thread. It posts every ready job as non-blocking MPI calls
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather(v), MPI_Comm_idup) on the job's communicator and polls
// all posted jobs (MPI_Testall) against their deadlines, so jobs of different groups may complete
// in any order on any worker, and nothing waits for one worker's order of work. Each worker tells the
// others which collectives it reached (Arrivals), so a job past its deadline fails with an error
// naming the collective, its step and the workers that never came; MPI is unusable
// then (its requests never complete), every later job fails at once, and the process ends through
// abort(), which ends every worker. The four operations span the workers (MPI_Iallreduce,
// MPI_Ireduce_scatter, MPI_Iallgatherv, MPI_Ibcast) after the local participants met at a
// rendezvous (and, for the reductions, reduced in process). Send and receive go between two workers
// (MPI_Isend, MPI_Irecv: a header with the tensor's type, then its bytes) on their group's
// communicator, so that transfers of different groups never match each other.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "graph/float16.h"
#include "runtime/allocator.h"
#include "runtime/collectives/in_process_communicator.h"
#include "runtime/collectives/mpi_arrivals.h"
#include "runtime/collectives/rendezvous.h"
#include "runtime/collectives/worker_communicator.h"

namespace mirra::runtime {

namespace {

using Clock = CollectiveClock;
using graph::Status;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

std::string seconds_between(Clock::time_point from, Clock::time_point to) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", std::chrono::duration<double>(to - from).count());
  return text;
}

// MPI counts are ints: longer buffers go in pieces of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

// A transfer's header: the dtype, the rank and the dims of the tensor whose bytes follow.
using TransferHeader = std::array<int64_t, 2 + kMaxRank>;
constexpr int kHeaderTag = 0, kBytesTag = 1;

// Posts `bytes` at `data` to (or from) worker `peer` in pieces MPI's counts take, all under one tag:
// MPI keeps their order between two workers.
int post_bytes(bool sending, void* data, int64_t bytes, int peer, MPI_Comm comm, std::vector<MPI_Request>& requests) {
  for (int64_t first = 0; first < bytes; first += kMaxCount) {
    requests.emplace_back();
    std::byte* piece = static_cast<std::byte*>(data) + first;
    const int count = static_cast<int>(std::min(kMaxCount, bytes - first));
    const int code = sending ? MPI_Isend(piece, count, MPI_BYTE, peer, kBytesTag, comm, &requests.back())
                             : MPI_Irecv(piece, count, MPI_BYTE, peer, kBytesTag, comm, &requests.back());
    if (code != MPI_SUCCESS) return code;
  }
  return MPI_SUCCESS;
}

// The tensor type a received header describes, refused unless it is one a sender could have sent.
graph::Expected<std::pair<graph::DType, TensorShape>> header_type(const TransferHeader& header) {
  const int64_t dtype = header[0], rank = header[1];
  if (dtype < 0 || dtype > static_cast<int64_t>(graph::DType::f16) || rank < 0 || rank > kMaxRank) {
    return graph::data_loss("a transfer header of dtype " + std::to_string(dtype) + " and rank " + std::to_string(rank));
  }
  std::vector<int64_t> dims(header.begin() + 2, header.begin() + 2 + rank);
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && elements > (int64_t{1} << 46) / d)) return graph::data_loss("a transfer header of impossible dims");
    elements *= d;
  }
  return std::pair{static_cast<graph::DType>(dtype), TensorShape(dims)};
}

// How long the communication thread polls (posted jobs, or its queue) without sleeping after the
// last progress.
constexpr auto kPollWithoutPause = std::chrono::milliseconds(20);

// Work for the communication thread: post() starts its MPI calls (their requests go in
// `requests`), finish() runs once they completed, or with the error that ended them.
struct Job {
  std::string what;  // "all_reduce 'all_reduce/bucket_0' (instance 12)"
  int64_t group = -1;  // a collective group's index (prepare's order); -1 for the calls before training
  int64_t run = 0;     // which run of the group (Arrivals::announce)
  std::optional<CollectivePhases> phases;  // kept for traces: filled as the job goes
  Clock::time_point deadline = Clock::time_point::max();
  std::function<int(std::vector<MPI_Request>&)> post;
  std::function<void(Status)> finish;
  std::vector<MPI_Request> requests;
  Clock::time_point posted;
  bool warned = false;
};

enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_gather: return "all_gather";
    case Kind::broadcast: return "broadcast";
  }
  return "?";
}

// What one local participant brings to the step across workers, once done with the in-process part.
struct Part {
  Kind kind = Kind::all_reduce;
  Reduction reduction = Reduction::sum;
  int root = 0;                 // broadcast: the participant across workers whose buffer everyone gets
  std::vector<Tensor> sources;  // reduce_scatter: its share of each local sum; all_gather: its inputs
  std::span<Tensor> outputs;
  std::vector<std::vector<int>> counts, offsets;  // per tensor: MPI's counts and offsets per worker
  Clock::time_point start;                        // its call
  Clock::time_point deadline;
  Status status;  // a misfit, or the in-process part's failure: the others then fail with it
  CollectiveDone done;
};

// The local participants of one collective, once every one is done with the in-process part.
struct Meeting {
  Kind kind = Kind::all_reduce;
  Reduction reduction = Reduction::sum;
  int root = 0;
  Clock::time_point start = Clock::time_point::max();  // the first local participant's call
  Clock::time_point deadline = Clock::time_point::max();
  std::vector<Part> parts;  // by participant
  Status status;
};

// bf16 travels as its 16-bit patterns (MPI has no bf16 type), summed by bf16_sum.
MPI_Datatype mpi_type(graph::DType dtype) {
  if (dtype == graph::DType::bf16) return MPI_UINT16_T;
  return dtype == graph::DType::f64 ? MPI_DOUBLE : MPI_FLOAT;
}

// MPI_SUM for bf16 bit patterns: each pair of values summed in f32 and rounded to bf16, at every
// step of the reduction MPI chooses.
void bf16_sum(void* in, void* inout, int* length, MPI_Datatype*) {
  using Format = graph::BFloat16Format;
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = Format::from_float(Format::to_float(a[i]) + Format::to_float(b[i]));
}

// Divides every element of `t` by `n` (a mean's last step).
void divide(Tensor& t, int n) {
  if (t.dtype() == graph::DType::f64) {
    double* v = t.mutable_data<double>();
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] /= n;
  } else if (t.dtype() == graph::DType::bf16) {
    using Format = graph::BFloat16Format;
    auto* v = static_cast<uint16_t*>(t.mutable_raw_data());
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = Format::from_float(Format::to_float(v[i]) / static_cast<float>(n));
  } else {
    float* v = t.mutable_data<float>();
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] /= static_cast<float>(n);
  }
}

// Posts the broadcast of `bytes` bytes at `data` from worker `root`, in pieces MPI's counts hold.
int post_broadcast(void* data, int64_t bytes, int root, MPI_Comm comm, std::vector<MPI_Request>& requests) {
  for (int64_t first = 0; first < bytes; first += kMaxCount) {
    requests.emplace_back();
    const int code = MPI_Ibcast(static_cast<std::byte*>(data) + first, static_cast<int>(std::min(kMaxCount, bytes - first)),
                                MPI_BYTE, root, comm, &requests.back());
    if (code != MPI_SUCCESS) return code;
  }
  return MPI_SUCCESS;
}

int64_t nanoseconds(Clock::time_point t) { return t.time_since_epoch() / std::chrono::nanoseconds(1); }

class MpiCommunicator final : public WorkerCommunicator {
 public:
  MpiCommunicator(int rank, int size, MPI_Comm control, MPI_Comm notices, MPI_Op bf16_sum)
      : rank_(rank), size_(size), control_(control), notices_(notices), bf16_sum_(bf16_sum), arrivals_(rank, size, notices) {
    thread_ = std::thread([this] { communicate(); });
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queued_.notify_all();
    thread_.join();
    if (!broken_.ok()) abort(1);  // requests that never completed: MPI_Finalize would wait for them
    for (auto& [group, comm] : comms_) MPI_Comm_free(&comm.comm);
    MPI_Comm_free(&control_);
    MPI_Comm_free(&notices_);
    MPI_Op_free(&bf16_sum_);
    MPI_Finalize();
  }

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

 protected:
  // The local participants sum in this process (into every output, the same bits); participant 0's
  // result is then all-reduced across workers in place and copied to the others.
  void start_all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs, CollectiveDone done) override {
    const Clock::time_point start = Clock::now();
    local_.all_reduce(call, Reduction::sum, inputs, outputs)
        ->then([this, call, reduction, outputs, start, done = std::move(done)](Status status) mutable {
          meet(call, Kind::all_reduce, reduction, {.outputs = outputs}, start, std::move(done), std::move(status));
        });
  }
  // Within each worker the local participants reduce-scatter in this process: participant p of L
  // gets share p of each local sum, in a block of its own. The blocks are then reduce-scattered across
  // the workers (the bucket's calls in flight together), so participant p of worker w receives
  // worker_share(count, L, p, W, w) of each sum over every participant of every worker: each
  // element's sum lives on one replica. A lone local participant's inputs are its blocks.
  void start_reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs, CollectiveDone done) override {
    const Clock::time_point start = Clock::now();
    Status fits;  // a misfit still meets the others, which then all fail with it instead of waiting
    auto blocks = std::make_shared<std::vector<Tensor>>();
    for (size_t j = 0; j < inputs.size(); ++j) {
      const int64_t count = inputs[j].num_elements();
      const ShareRange mine = worker_share(count, call.group_size, call.participant, size_, rank_);
      if (fits.ok() && (j >= outputs.size() || outputs[j].dtype() != inputs[0].dtype() ||
                        inputs[j].dtype() != inputs[0].dtype() || outputs[j].num_elements() != mine.count)) {
        fits = graph::invalid_argument("reduce_scatter '" + call.group + "': participant " + std::to_string(call.participant) +
                                       "'s output " + std::to_string(j) + " does not hold its share of " +
                                       std::to_string(mine.count) + " elements of " + inputs[0].type_string() +
                                       " (worker " + std::to_string(rank_) + " of " + std::to_string(size_) + ")");
      }
      if (call.group_size > 1) {
        blocks->push_back(
            Tensor::empty(host_allocator(), inputs[j].dtype(), {participant_share(count, call.group_size, call.participant)}));
      }
    }
    if (call.group_size == 1) {
      return meet(call, Kind::reduce_scatter, reduction, {.sources = {inputs.begin(), inputs.end()}, .outputs = outputs}, start,
                  std::move(done), std::move(fits));
    }
    // The in-process call writes the blocks; its callback owns them until the step across workers.
    local_.reduce_scatter(call, Reduction::sum, inputs, *blocks)
        ->then([this, call, reduction, outputs, blocks, start, fits, done = std::move(done)](Status status) mutable {
          meet(call, Kind::reduce_scatter, reduction, {.sources = *blocks, .outputs = outputs}, start, std::move(done),
               fits.ok() ? std::move(status) : fits);
        });
  }
  // Every worker gathers every participant's rows (no in-process step: the local participants only meet).
  void start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        CollectiveDone done) override {
    const Clock::time_point start = Clock::now();
    Status status;  // a misfit still meets the others, which then all fail with it instead of waiting
    for (size_t j = 0; j < inputs.size() && status.ok(); ++j) {
      const Tensor& input = inputs[j];
      const Tensor* output = j < outputs.size() ? &outputs[j] : nullptr;
      const int64_t rows = output != nullptr && output->rank() > 0 ? output->dim(0) : -1;
      const ShareRange mine = rows < 0 ? ShareRange{} : worker_share(rows, call.group_size, call.participant, size_, rank_);
      bool fits = rows >= 0 && input.rank() == output->rank() && input.dtype() == output->dtype() && input.dim(0) == mine.count;
      for (int d = 1; fits && d < input.rank(); ++d) fits = input.dim(d) == output->dim(d);
      if (!fits) {
        status = graph::invalid_argument("all_gather '" + call.group + "': participant " + std::to_string(call.participant) +
                                         "'s input " + std::to_string(j) + " " + input.type_string() +
                                         " is not its rows of the gathered " + (output ? output->type_string() : "nothing") +
                                         " (worker " + std::to_string(rank_) + " of " + std::to_string(size_) + ")");
      }
    }
    meet(call, Kind::all_gather, Reduction::sum, {.sources = {inputs.begin(), inputs.end()}, .outputs = outputs}, start,
         std::move(done), std::move(status));
  }
  // Across W workers the participants are numbered worker by worker: `root` is participant
  // root % group_size of worker root / group_size. Its buffer crosses the workers once (MPI_Ibcast
  // from its worker) and is copied to the local participants of every worker.
  void start_broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done) override {
    Status status;  // a misfit still meets the others, which then all fail with it instead of waiting
    if (root < 0 || root >= call.group_size * size_) {
      status = graph::invalid_argument("broadcast '" + call.group + "': root " + std::to_string(root) +
                                       " is not one of the " + std::to_string(call.group_size * size_) +
                                       " participants across the workers");
    }
    meet(call, Kind::broadcast, Reduction::sum, {.root = root, .outputs = {&buffer, 1}}, Clock::now(), std::move(done),
         std::move(status));
  }

  // Between two tasks of this process, the in-process communicator; else MPI to the peer worker.
  void start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done) override {
    if (call.peer < 0 || call.peer == rank_) return local_.send(call, value)->then(std::move(done));
    auto job = transfer_job("send", call);
    if (!job.ok()) return done(job.status());
    auto header = std::make_shared<TransferHeader>();
    (*header)[0] = static_cast<int64_t>(value.dtype());
    (*header)[1] = value.rank();
    for (int d = 0; d < value.rank(); ++d) (*header)[2 + static_cast<size_t>(d)] = value.dim(d);
    job->job.post = [value, header, peer = call.peer, comm = job->comm](std::vector<MPI_Request>& requests) {
      requests.emplace_back();
      if (const int code = MPI_Isend(header->data(), static_cast<int>(header->size()), MPI_INT64_T, peer, kHeaderTag, comm,
                                     &requests.back());
          code != MPI_SUCCESS) {
        return code;
      }
      return post_bytes(/*sending=*/true, const_cast<void*>(value.raw_data()), static_cast<int64_t>(value.byte_size()), peer,
                        comm, requests);
    };
    job->job.finish = std::move(done);
    submit(std::move(job->job));
  }
  // The header first; then a tensor of its type, which the bytes fill.
  void start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done) override {
    if (call.peer < 0 || call.peer == rank_) return local_.recv(call, value)->then(std::move(done));
    auto job = transfer_job("recv", call);
    if (!job.ok()) return done(job.status());
    auto header = std::make_shared<TransferHeader>();
    job->job.post = [header, peer = call.peer, comm = job->comm](std::vector<MPI_Request>& requests) {
      requests.emplace_back();
      return MPI_Irecv(header->data(), static_cast<int>(header->size()), MPI_INT64_T, peer, kHeaderTag, comm, &requests.back());
    };
    job->job.finish = [this, header, &value, peer = call.peer, comm = job->comm, what = job->job.what,
                       deadline = call.deadline, done = std::move(done)](Status status) mutable {
      if (!status.ok()) return done(std::move(status));
      auto type = header_type(*header);
      if (!type.ok()) return done(type.status().with_context(what));
      value = Tensor::empty(host_allocator(), type->first, type->second);
      Job bytes{.what = what, .deadline = deadline};
      bytes.post = [&value, peer, comm](std::vector<MPI_Request>& requests) {
        return post_bytes(/*sending=*/false, value.mutable_raw_data(), static_cast<int64_t>(value.byte_size()), peer, comm,
                          requests);
      };
      bytes.finish = std::move(done);
      submit(std::move(bytes));
    };
    submit(std::move(job->job));
  }

 public:
  Status prepare(const std::vector<std::string>& groups) override {
    auto made = std::make_shared<std::vector<MPI_Comm>>(groups.size(), MPI_COMM_NULL);
    Job job{.what = "preparing " + std::to_string(groups.size()) + " collective groups",
            .deadline = deadline_after(std::chrono::minutes(5))};
    job.post = [made](std::vector<MPI_Request>& requests) {
      requests.resize(made->size());
      for (size_t i = 0; i < made->size(); ++i) {
        if (const int code = MPI_Comm_idup(MPI_COMM_WORLD, &(*made)[i], &requests[i]); code != MPI_SUCCESS) return code;
      }
      return MPI_SUCCESS;
    };
    MIRRA_RETURN_IF_ERROR(run_and_wait(std::move(job)));
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < groups.size(); ++i) {
      MPI_Comm_set_errhandler((*made)[i], MPI_ERRORS_RETURN);
      auto [it, added] = comms_.emplace(groups[i], GroupComm{(*made)[i], static_cast<int64_t>(comms_.size())});
      if (!added) MPI_Comm_free(&(*made)[i]);  // prepared before
    }
    return Status();
  }

  graph::Expected<std::vector<std::string>> exchange(const std::string& mine, Clock::time_point deadline) override {
    auto sizes = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(size_));
    const int64_t my_size = static_cast<int64_t>(mine.size());
    Job count_job{.what = "exchanging sizes", .deadline = deadline};
    count_job.post = [this, sizes, my_size](std::vector<MPI_Request>& requests) {
      requests.resize(1);
      return MPI_Iallgather(&my_size, 1, MPI_INT64_T, sizes->data(), 1, MPI_INT64_T, control_, &requests[0]);
    };
    MIRRA_RETURN_IF_ERROR(run_and_wait(std::move(count_job)));
    std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
    int64_t total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if ((*sizes)[r] < 0 || total + (*sizes)[r] > kMaxCount) return graph::invalid_argument("the exchanged texts are too large");
      counts[r] = static_cast<int>((*sizes)[r]);
      offsets[r] = static_cast<int>(total);
      total += (*sizes)[r];
    }
    auto all = std::make_shared<std::string>(static_cast<size_t>(total), '\0');
    Job data_job{.what = "exchanging texts", .deadline = deadline};
    data_job.post = [this, all, &mine, &counts, &offsets](std::vector<MPI_Request>& requests) {
      requests.resize(1);
      return MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all->data(), counts.data(), offsets.data(),
                             MPI_CHAR, control_, &requests[0]);
    };
    MIRRA_RETURN_IF_ERROR(run_and_wait(std::move(data_job)));
    std::vector<std::string> texts;
    for (size_t r = 0; r < counts.size(); ++r) texts.push_back(all->substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(counts[r])));
    return texts;
  }

  Status broadcast_bytes(std::string& bytes, Clock::time_point deadline) override {
    auto size = std::make_shared<int64_t>(static_cast<int64_t>(bytes.size()));
    Job size_job{.what = "broadcasting a size", .deadline = deadline};
    size_job.post = [this, size](std::vector<MPI_Request>& requests) {
      requests.resize(1);
      return MPI_Ibcast(size.get(), 1, MPI_INT64_T, 0, control_, &requests[0]);
    };
    MIRRA_RETURN_IF_ERROR(run_and_wait(std::move(size_job)));
    bytes.resize(static_cast<size_t>(*size));
    Job data_job{.what = "broadcasting " + std::to_string(*size) + " bytes", .deadline = deadline};
    data_job.post = [this, &bytes](std::vector<MPI_Request>& requests) {
      return post_broadcast(bytes.data(), static_cast<int64_t>(bytes.size()), 0, control_, requests);
    };
    return run_and_wait(std::move(data_job));
  }

  void record_phases(bool on) override {
    recording_phases_.store(on);
    std::lock_guard lock(mutex_);
    wants_arrival_times_ = on;
    if (!on) phases_.clear();
  }
  std::vector<CollectivePhases> take_phases() override {
    std::lock_guard lock(mutex_);
    return std::exchange(phases_, {});
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // A send's or recv's job on its group's communicator, its peer checked.
  struct TransferJob {
    Job job;
    MPI_Comm comm = MPI_COMM_NULL;
  };
  graph::Expected<TransferJob> transfer_job(std::string_view operation, const CollectiveCall& call) {
    const std::string what = std::string(operation) + " '" + call.group + "' (instance " + std::to_string(call.instance) +
                             ") " + (operation == "send" ? "to" : "from") + " worker " + std::to_string(call.peer);
    if (call.peer >= size_) {
      return graph::invalid_argument(what + ": there are " + std::to_string(size_) + " workers (this is worker " +
                                     std::to_string(rank_) + ")");
    }
    std::lock_guard lock(mutex_);
    const auto it = comms_.find(call.group);
    if (it == comms_.end()) return graph::internal_error(what + ": its group was not prepared for MPI");
    return TransferJob{.job = Job{.what = what, .deadline = call.deadline}, .comm = it->second.comm};
  }

  // Participant `call.participant` is done with the in-process part; the last local one hands the
  // step across workers to the communication thread.
  void meet(const CollectiveCall& call, Kind kind, Reduction reduction, Part part, Clock::time_point start,
            CollectiveDone done, Status status) {
    const std::string what =
        std::string(kind_name(kind)) + " '" + call.group + "' (instance " + std::to_string(call.instance) + ")";
    part.kind = kind;
    part.reduction = reduction;
    part.start = start;
    part.deadline = call.deadline;
    part.status = std::move(status);
    part.done = std::move(done);
    std::optional<std::vector<Part>> parts =
        meetings_.arrive({nullptr, call.group, call.instance}, what, call.participant, call.group_size, call.deadline, std::move(part));
    if (!parts) return;
    auto shared = std::make_shared<Meeting>(Meeting{.kind = kind, .reduction = reduction, .root = (*parts)[0].root});
    for (Part& p : *parts) {
      shared->start = std::min(shared->start, p.start);
      shared->deadline = std::min(shared->deadline, p.deadline);
      if (shared->status.ok() && !p.status.ok()) shared->status = p.status;
      if (shared->status.ok() && (p.kind != kind || p.root != shared->root)) {
        shared->status = graph::invalid_argument(what + ": the local participants call different collectives or roots");
      }
    }
    shared->parts = std::move(*parts);
    const auto complete = [shared](const Status& s) {
      for (Part& p : shared->parts) p.done(s);
    };
    if (!shared->status.ok()) return complete(shared->status);
    GroupComm group;
    {
      std::lock_guard lock(mutex_);
      if (auto it = comms_.find(call.group); it != comms_.end()) group = it->second;
    }
    if (group.comm == MPI_COMM_NULL) return complete(graph::internal_error(what + ": its group was not prepared for MPI"));
    if (Status counted = count_per_worker(*shared); !counted.ok()) return complete(counted.with_context(what));
    if (Status fits = check_broadcast(*shared); !fits.ok()) return complete(fits.with_context(what));
    Job job{.what = what, .group = group.index, .deadline = shared->deadline};
    if (recording_phases_.load(std::memory_order_relaxed)) {
      job.phases = CollectivePhases{.group = call.group, .start_ns = nanoseconds(shared->start), .local_done_ns = nanoseconds(Clock::now())};
    }
    job.post = [this, shared, comm = group.comm](std::vector<MPI_Request>& requests) {
      return post_across_workers(*shared, comm, requests);
    };
    job.finish = [this, shared, complete](Status s) {
      if (s.ok()) finish_across_workers(*shared);
      complete(s);
    };
    submit(std::move(job));
  }

  // For reduce_scatter and all_gather: MPI's counts and offsets per worker of each tensor's call
  // (elements of a reduce-scatter's block, bytes of an all-gather's rows), which must fit ints.
  Status count_per_worker(Meeting& m) const {
    if (m.kind == Kind::all_reduce) return Status();
    const int64_t participants = static_cast<int64_t>(m.parts.size());
    for (int64_t p = 0; p < participants; ++p) {
      Part& part = m.parts[static_cast<size_t>(p)];
      for (size_t j = 0; j < part.sources.size(); ++j) {
        const Tensor& whole = m.parts[0].outputs[j];
        const int64_t block = m.kind == Kind::reduce_scatter ? part.sources[j].num_elements()
                                                             : participant_share(whole.dim(0), participants, p);
        const int64_t unit = m.kind == Kind::reduce_scatter || whole.dim(0) == 0 ? 1 : whole.byte_size() / whole.dim(0);
        std::vector<int>& counts = part.counts.emplace_back();
        std::vector<int>& offsets = part.offsets.emplace_back();
        int64_t offset = 0;
        for (int w = 0; w < size_; ++w) {
          const int64_t count = participant_share(block, size_, w) * unit;
          if (offset + count > kMaxCount) return graph::invalid_argument("a participant's part exceeds MPI's counts (2^30)");
          counts.push_back(static_cast<int>(count));
          offsets.push_back(static_cast<int>(offset));
          offset += count;
        }
      }
    }
    return Status();
  }

  // For broadcast: the local participants' buffers, which must be alike (the workers' must too, or
  // MPI fails the call).
  static Status check_broadcast(const Meeting& m) {
    if (m.kind != Kind::broadcast) return Status();
    const Tensor& first = m.parts[0].outputs[0];
    for (size_t p = 1; p < m.parts.size(); ++p) {
      const Tensor& buffer = m.parts[p].outputs[0];
      if (buffer.dtype() != first.dtype() || !(buffer.shape() == first.shape())) {
        return graph::invalid_argument("participant " + std::to_string(p) + " holds " + buffer.type_string() +
                                       " where participant 0 holds " + first.type_string());
      }
    }
    return Status();
  }

  // The buffer that crosses the workers: broadcast's root's on its worker, else participant 0's,
  // whose result finish_across_workers copies to the others.
  Tensor& across_workers_buffer(Meeting& m) const {
    const int local = static_cast<int>(m.parts.size());
    if (m.kind == Kind::broadcast && m.root / local == rank_) return m.parts[static_cast<size_t>(m.root % local)].outputs[0];
    return m.parts[0].outputs[0];
  }

  // Posts the meeting's calls across workers, in the same order on every worker: one per tensor,
  // all in flight at once, each reading and writing its tensors in place.
  int post_across_workers(Meeting& m, MPI_Comm comm, std::vector<MPI_Request>& requests) {
    const auto op_for = [this](graph::DType dtype) { return dtype == graph::DType::bf16 ? bf16_sum_ : MPI_SUM; };
    if (m.kind == Kind::broadcast) {
      Tensor& buffer = across_workers_buffer(m);
      return post_broadcast(buffer.mutable_raw_data(), static_cast<int64_t>(buffer.byte_size()),
                            m.root / static_cast<int>(m.parts.size()), comm, requests);
    }
    if (m.kind == Kind::all_reduce) {  // participant 0's result, copied to the others afterwards
      for (Tensor& t : m.parts[0].outputs) {
        auto* data = static_cast<std::byte*>(t.mutable_raw_data());
        const int64_t element = static_cast<int64_t>(graph::dtype_size(t.dtype()));
        for (int64_t first = 0; first < t.num_elements(); first += kMaxCount) {
          const int count = static_cast<int>(std::min(kMaxCount, t.num_elements() - first));
          requests.emplace_back();
          const int code = MPI_Iallreduce(MPI_IN_PLACE, data + first * element, count, mpi_type(t.dtype()), op_for(t.dtype()),
                                          comm, &requests.back());
          if (code != MPI_SUCCESS) return code;
        }
      }
      return MPI_SUCCESS;
    }
    const int64_t participants = static_cast<int64_t>(m.parts.size());
    for (int64_t p = 0; p < participants; ++p) {
      Part& part = m.parts[static_cast<size_t>(p)];
      for (size_t j = 0; j < part.sources.size(); ++j) {
        const Tensor& source = part.sources[j];
        requests.emplace_back();
        int code = MPI_SUCCESS;
        if (m.kind == Kind::reduce_scatter) {
          code = MPI_Ireduce_scatter(source.raw_data(), part.outputs[j].mutable_raw_data(), part.counts[j].data(),
                                     mpi_type(source.dtype()), op_for(source.dtype()), comm, &requests.back());
        } else {  // participant p's rows of tensor j, gathered into participant 0's output j
          Tensor& whole = m.parts[0].outputs[j];
          const int64_t row_bytes = whole.dim(0) == 0 ? 0 : whole.byte_size() / whole.dim(0);
          auto* block = static_cast<std::byte*>(whole.mutable_raw_data()) +
                        worker_share(whole.dim(0), participants, p, 1, 0).first * row_bytes;
          code = MPI_Iallgatherv(source.raw_data(), static_cast<int>(source.byte_size()), MPI_BYTE, block,
                                 part.counts[j].data(), part.offsets[j].data(), MPI_BYTE, comm, &requests.back());
        }
        if (code != MPI_SUCCESS) return code;
      }
    }
    return MPI_SUCCESS;
  }

  // After the calls across workers: a mean's division, and the result copied to the participants
  // that share it (all_reduce's and all_gather's from participant 0, broadcast's from the buffer
  // that crossed the workers).
  void finish_across_workers(Meeting& m) {
    const int participants = static_cast<int>(m.parts.size()) * size_;
    if (m.reduction == Reduction::mean && (m.kind == Kind::all_reduce || m.kind == Kind::reduce_scatter)) {
      for (size_t p = 0; p < (m.kind == Kind::all_reduce ? 1 : m.parts.size()); ++p) {
        for (Tensor& t : m.parts[p].outputs) divide(t, participants);
      }
    }
    if (m.kind == Kind::reduce_scatter) return;
    const std::span<Tensor> result = m.kind == Kind::broadcast ? std::span<Tensor>(&across_workers_buffer(m), 1)
                                                               : m.parts[0].outputs;
    for (Part& part : m.parts) {
      for (size_t j = 0; j < result.size(); ++j) {
        Tensor& to = part.outputs[j];
        if (to.raw_data() != result[j].raw_data() && to.byte_size() > 0) {
          std::memcpy(to.mutable_raw_data(), result[j].raw_data(), to.byte_size());
        }
      }
    }
  }

  // A finished job's phases, completed with when the other workers arrived (communication thread).
  void keep_phases(Job& job, Clock::time_point done) {
    CollectivePhases& phases = *job.phases;
    const Clock::time_point local_done{std::chrono::nanoseconds(phases.local_done_ns)};
    phases.peers_arrived_ns = nanoseconds(std::min(done, arrivals_.last_arrival(job.group, job.run, local_done)));
    phases.done_ns = nanoseconds(done);
    std::lock_guard lock(mutex_);
    if (phases_.size() < kMaxPhases) phases_.push_back(std::move(phases));
  }

  void submit(Job job) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(job));
    }
    queued_.notify_all();
  }

  // For the calls made before training (prepare, exchange, broadcast_bytes): the job, waited for.
  Status run_and_wait(Job job) {
    auto result = std::make_shared<std::promise<Status>>();
    std::future<Status> finished = result->get_future();
    job.finish = [result](Status s) { result->set_value(std::move(s)); };
    submit(std::move(job));
    return finished.get();
  }

  void communicate() {
    std::vector<Job> active;
    auto last_progress = Clock::now();
    for (;;) {
      std::deque<Job> arrived;
      {
        std::unique_lock lock(mutex_);
        // Idle for a while: sleep until a job comes. Jobs come in bursts (a step's buckets), so
        // shortly after one the thread keeps polling instead, and a new job starts without the
        // latency of waking a sleeping thread.
        if (active.empty() && Clock::now() - last_progress >= kPollWithoutPause) {
          queued_.wait_for(lock, Arrivals::kHeartbeat, [&] { return stopping_ || !queue_.empty(); });  // heartbeats go on
        }
        if (stopping_) {
          arrived.swap(queue_);
          lock.unlock();
          if (broken_.ok()) arrivals_.stop();
          const Status stopped = graph::aborted("the MPI collective was shut down");
          for (Job& job : active) job.finish(stopped.with_context(job.what));
          for (Job& job : arrived) job.finish(stopped.with_context(job.what));
          return;
        }
        arrived.swap(queue_);
        arrivals_.keep_times(wants_arrival_times_);
      }
      for (Job& job : arrived) {
        if (!broken_.ok()) {
          job.finish(broken_);
          continue;
        }
        if (const int code = job.post(job.requests); code != MPI_SUCCESS) {
          job.finish(graph::internal_error(job.what + ": " + mpi_error(code)));
          continue;
        }
        job.posted = Clock::now();
        if (job.group >= 0) job.run = arrivals_.announce(job.group);
        active.push_back(std::move(job));
      }
      bool progressed = !arrived.empty();
      arrivals_.heartbeat();
      arrivals_.poll();
      const auto now = Clock::now();
      for (size_t i = 0; i < active.size();) {
        Job& job = active[i];
        int complete = 0;
        const int code = MPI_Testall(static_cast<int>(job.requests.size()), job.requests.data(), &complete, MPI_STATUSES_IGNORE);
        Status outcome;
        bool ended = true;
        if (code != MPI_SUCCESS) {
          outcome = graph::internal_error(job.what + ": " + mpi_error(code));
        } else if (!complete && now >= job.deadline) {
          // Name who fell silent, else who never came.
          std::vector<int> missing = arrivals_.silent();
          if (missing.empty() && job.group >= 0) missing = arrivals_.missing(job.group);
          const std::string who = missing.empty() ? "not all " + std::to_string(size_) + " workers took part"
                                                  : "worker" + std::string(missing.size() > 1 ? "s " : " ") + participant_list(missing) +
                                                        " of " + std::to_string(size_) + " did not take part";
          outcome = graph::deadline_exceeded(job.what + ": " + who + " within " + seconds_between(job.posted, now) +
                                             " (this is worker " + std::to_string(rank_) + "); a worker has died or stalls");
          broken_ = outcome;
        } else if (!complete) {
          ended = false;
          if (!job.warned && job.deadline != Clock::time_point::max() && now - job.posted >= (job.deadline - job.posted) / 2) {
            job.warned = true;
            std::fprintf(stderr, "mirra: warning: worker %d: %s has waited %s for the other workers\n", rank_, job.what.c_str(),
                         seconds_between(job.posted, now).c_str());
          }
        }
        if (!ended) {
          ++i;
          continue;
        }
        progressed = true;
        Job finished = std::move(job);
        active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
        if (finished.phases && outcome.ok()) keep_phases(finished, now);
        finished.finish(std::move(outcome));
      }
      if (!broken_.ok()) {
        for (Job& job : active) job.finish(broken_);
        active.clear();
      }
      // MPI's non-blocking collectives advance only inside MPI calls, one round of their schedule
      // per poll, so a posted job is polled without pause (yielding the core to runnable threads);
      // only a job that has made no progress for a while (a slow peer) is polled at a slower pace.
      if (progressed) last_progress = Clock::now();
      if (Clock::now() - last_progress < kPollWithoutPause) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  InProcessCommunicator local_;
  const int rank_, size_;
  MPI_Comm control_;
  MPI_Comm notices_;
  MPI_Op bf16_sum_;
  Arrivals arrivals_;  // the communication thread's
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Job> queue_;
  struct GroupComm {
    MPI_Comm comm = MPI_COMM_NULL;
    int64_t index = -1;  // in prepare's order, the same on every worker
  };
  std::map<std::string, GroupComm> comms_;
  static constexpr size_t kMaxPhases = 100'000;
  std::atomic<bool> recording_phases_{false};
  bool wants_arrival_times_ = false;  // the communication thread passes it on to arrivals_
  std::vector<CollectivePhases> phases_;
  Rendezvous<Part> meetings_;  // the local participants, once done with the in-process part
  bool stopping_ = false;
  Status broken_;  // the communication thread's, then the destructor's
  std::thread thread_;
};

}  // namespace

graph::Expected<std::shared_ptr<WorkerCommunicator>> open_mpi_communicator() {
  static std::atomic<bool> opened{false};
  if (opened.exchange(true)) return graph::failed_precondition("MPI was opened before; a process opens it once");
  // OpenMPI's non-blocking all-reduce (libnbc) chooses a binomial tree by default, which moves
  // every byte log2(W) times and runs at half its blocking MPI_Allreduce's speed from a few MiB;
  // Rabenseifner's schedule (reduce-scatter, then all-gather) matches it. A setting of the user's
  // (the environment, mpirun --mca) wins; other MPIs ignore the variable.
  ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
  int provided = 0;
  if (const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); code != MPI_SUCCESS) {
    return graph::unavailable("MPI_Init_thread failed: " + mpi_error(code));
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return graph::unavailable("this MPI cannot be called from more than one thread (MPI_THREAD_SERIALIZED)");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm control = MPI_COMM_NULL;
  if (const int code = MPI_Comm_dup(MPI_COMM_WORLD, &control); code != MPI_SUCCESS) {
    return graph::unavailable("MPI_Comm_dup failed: " + mpi_error(code));
  }
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  MPI_Comm notices = MPI_COMM_NULL;
  if (const int code = MPI_Comm_dup(MPI_COMM_WORLD, &notices); code != MPI_SUCCESS) {
    return graph::unavailable("MPI_Comm_dup failed: " + mpi_error(code));
  }
  MPI_Comm_set_errhandler(notices, MPI_ERRORS_RETURN);
  MPI_Op sum_of_bf16 = MPI_OP_NULL;
  if (const int code = MPI_Op_create(&bf16_sum, /*commute=*/1, &sum_of_bf16); code != MPI_SUCCESS) {
    return graph::unavailable("MPI_Op_create failed: " + mpi_error(code));
  }
  return std::shared_ptr<WorkerCommunicator>(std::make_shared<MpiCommunicator>(rank, size, control, notices, sum_of_bf16));
}

bool built_with_mpi() { return true; }

}  // namespace mirra::runtime
