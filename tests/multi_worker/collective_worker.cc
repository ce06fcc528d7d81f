// One worker of `mpirun -np W collective_worker`: the MPI collective's four operations over W workers
// x 2 local participants against a plain loop over what every participant brought (integer-valued
// values, so any order of the sums gives the same bits): all_reduce (sum in f64, mean in f32),
// reduce_scatter (each participant's worker_share), all_gather (rows in participant-then-worker
// order), broadcast from a participant of the last worker and from participant 0, send and receive
// round a ring of the workers (tensors of several types and sizes in a row), and the errors: a
// broadcast root outside the participants, and a local participant that never comes (the local
// meeting fails at its deadline naming it, instead of waiting for ever). Prints "worker w: ok" and
// exits 0, or names the first mismatch and exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/collectives/worker_communicator.h"

namespace {

using mirra::graph::DType;
using mirra::graph::Status;
using namespace mirra::runtime;

constexpr int kLocal = 2;
int workers = 1, rank = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "worker %d: %s\n", rank, what.c_str());
  std::exit(1);
}

// The value participant p of worker w brings at element i of tensor j.
double value(int w, int p, int j, int64_t i) { return static_cast<double>((w * 7 + p * 3 + j * 5 + i) % 11) - 5; }

Tensor filled(DType dtype, int64_t count, int p, int j) {
  Tensor t = Tensor::empty(host_allocator(), dtype, {count});
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::f64) {
      t.mutable_data<double>()[i] = value(rank, p, j, i);
    } else {
      t.mutable_data<float>()[i] = static_cast<float>(value(rank, p, j, i));
    }
  }
  return t;
}

double at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}

// Runs `call(p, done)` for every local participant and waits for all; their statuses.
template <class Call>
std::vector<Status> for_each_participant(Call call, int participants = kLocal) {
  std::vector<std::promise<Status>> results(participants);
  for (int p = 0; p < participants; ++p) call(p, [&results, p](Status s) { results[p].set_value(std::move(s)); });
  std::vector<Status> statuses;
  for (auto& r : results) statuses.push_back(r.get_future().get());
  return statuses;
}

void expect_ok(const std::vector<Status>& statuses, const std::string& what) {
  for (const Status& s : statuses) {
    if (!s.ok()) fail(what + ": " + s.message());
  }
}

CollectiveCall call_of(const std::string& group, int p, int64_t instance = 1) {
  return {.group = group, .instance = instance, .participant = p, .group_size = kLocal, .deadline = deadline_after(std::chrono::seconds(60))};
}

void check_all_reduce(WorkerCommunicator& collective, DType dtype, Reduction reduction, const std::string& group) {
  const int64_t counts[] = {5, 70001};
  std::vector<std::vector<Tensor>> tensors(kLocal);
  for (int p = 0; p < kLocal; ++p) {
    for (int j = 0; j < 2; ++j) tensors[p].push_back(filled(dtype, counts[j], p, j));
  }
  expect_ok(for_each_participant([&](int p, CollectiveDone done) {
              collective.all_reduce(call_of(group, p), reduction, tensors[p], tensors[p])->then(std::move(done));
            }),
            group);
  const int participants = kLocal * workers;
  for (int j = 0; j < 2; ++j) {
    for (int64_t i = 0; i < counts[j]; ++i) {
      double want = 0;
      for (int w = 0; w < workers; ++w) {
        for (int p = 0; p < kLocal; ++p) want += value(w, p, j, i);
      }
      if (reduction == Reduction::mean) want = dtype == DType::f32 ? static_cast<double>(static_cast<float>(want) / participants)
                                                                   : want / participants;
      for (int p = 0; p < kLocal; ++p) {
        if (at(tensors[p][j], i) != want) {
          fail(group + ": participant " + std::to_string(p) + " tensor " + std::to_string(j) + " element " + std::to_string(i) +
               " is " + std::to_string(at(tensors[p][j], i)) + ", not " + std::to_string(want));
        }
      }
    }
  }
}

void check_reduce_scatter(WorkerCommunicator& collective) {
  const int64_t count = 1003;
  std::vector<std::vector<Tensor>> inputs(kLocal), outputs(kLocal);
  for (int p = 0; p < kLocal; ++p) {
    inputs[p].push_back(filled(DType::f64, count, p, 0));
    outputs[p].push_back(Tensor::empty(host_allocator(), DType::f64, {worker_share(count, kLocal, p, workers, rank).count}));
  }
  expect_ok(for_each_participant([&](int p, CollectiveDone done) {
              collective.reduce_scatter(call_of("reduce_scatter", p), Reduction::sum, inputs[p], outputs[p])->then(std::move(done));
            }),
            "reduce_scatter");
  for (int p = 0; p < kLocal; ++p) {
    const ShareRange mine = worker_share(count, kLocal, p, workers, rank);
    for (int64_t k = 0; k < mine.count; ++k) {
      double want = 0;
      for (int w = 0; w < workers; ++w) {
        for (int q = 0; q < kLocal; ++q) want += value(w, q, 0, mine.first + k);
      }
      if (at(outputs[p][0], k) != want) fail("reduce_scatter: participant " + std::to_string(p) + " element " + std::to_string(k));
    }
  }
}

void check_all_gather(WorkerCommunicator& collective) {
  const int64_t rows = 11, columns = 3;
  std::vector<std::vector<Tensor>> inputs(kLocal), outputs(kLocal);
  for (int p = 0; p < kLocal; ++p) {
    const ShareRange mine = worker_share(rows, kLocal, p, workers, rank);
    Tensor in = Tensor::empty(host_allocator(), DType::f32, {mine.count, columns});
    for (int64_t r = 0; r < mine.count; ++r) {
      for (int64_t c = 0; c < columns; ++c) in.mutable_data<float>()[r * columns + c] = static_cast<float>((mine.first + r) * 10 + c);
    }
    inputs[p].push_back(std::move(in));
    outputs[p].push_back(Tensor::empty(host_allocator(), DType::f32, {rows, columns}));
  }
  expect_ok(for_each_participant([&](int p, CollectiveDone done) {
              collective.all_gather(call_of("all_gather", p), inputs[p], outputs[p])->then(std::move(done));
            }),
            "all_gather");
  for (int p = 0; p < kLocal; ++p) {
    for (int64_t e = 0; e < rows * columns; ++e) {
      if (outputs[p][0].data<float>()[e] != static_cast<float>((e / columns) * 10 + e % columns)) {
        fail("all_gather: participant " + std::to_string(p) + " element " + std::to_string(e));
      }
    }
  }
}

void check_broadcast(WorkerCommunicator& collective, int root, const std::string& group) {
  const int64_t count = 5000;
  std::vector<Tensor> buffers;
  for (int p = 0; p < kLocal; ++p) buffers.push_back(filled(DType::f64, count, p, 0));
  expect_ok(for_each_participant([&](int p, CollectiveDone done) {
              collective.broadcast(call_of(group, p), root, buffers[p])->then(std::move(done));
            }),
            group);
  for (int p = 0; p < kLocal; ++p) {
    for (int64_t i = 0; i < count; ++i) {
      if (at(buffers[p], i) != value(root / kLocal, root % kLocal, 0, i)) {
        fail(group + ": participant " + std::to_string(p) + " element " + std::to_string(i) + " is not root " + std::to_string(root) + "'s");
      }
    }
  }
}

// Each worker sends to the next one round a ring and receives from the one before it, several tensors
// of one group in a row (they must arrive in order, whole, with their types), and a send to a worker
// that is not there is refused naming it.
void check_send_and_recv(WorkerCommunicator& collective) {
  const int next = (rank + 1) % workers, before = (rank + workers - 1) % workers;
  const auto many = [](int w) {  // several MiB: MPI may send it in another protocol than the small ones
    Tensor t = Tensor::empty(host_allocator(), DType::f64, {1'000'000});
    for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<double>()[i] = value(w, 0, 0, i);
    return t;
  };
  const auto sent_by = [&many](int w) {
    return std::vector<Tensor>{Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, static_cast<float>(w)}),
                               Tensor::from<int64_t>({4}, {-1, int64_t{1} << 40, 7, w}),
                               Tensor::empty(host_allocator(), DType::f64, {0, 3}), Tensor::from<uint8_t>({}, {static_cast<uint8_t>(200 + w)}),
                               many(w)};
  };
  const std::vector<Tensor> mine = sent_by(rank), want = sent_by(before);
  std::vector<std::shared_ptr<Work>> sends;
  for (size_t j = 0; j < mine.size(); ++j) {
    sends.push_back(collective.send({.group = "ring", .instance = static_cast<int64_t>(j) + 1, .participant = 0, .group_size = 2,
                                     .peer = next, .deadline = deadline_after(std::chrono::seconds(60))},
                                    mine[j]));
  }
  for (size_t j = 0; j < want.size(); ++j) {
    Tensor received;
    const Status got = collective
                           .recv({.group = "ring", .instance = static_cast<int64_t>(j) + 1, .participant = 1, .group_size = 2,
                                  .peer = before, .deadline = deadline_after(std::chrono::seconds(60))},
                                 received)
                           ->wait();
    if (!got.ok()) fail("recv " + std::to_string(j) + ": " + got.message());
    if (received.dtype() != want[j].dtype() || !(received.shape() == want[j].shape()) ||
        std::memcmp(received.raw_data(), want[j].raw_data(), want[j].byte_size()) != 0) {
      fail("recv " + std::to_string(j) + " from worker " + std::to_string(before) + ": " + received.type_string() +
           " is not what was sent, " + want[j].type_string());
    }
  }
  for (auto& sent : sends) {
    if (const Status s = sent->wait(); !s.ok()) fail("send: " + s.message());
  }
  const Status nowhere =
      collective.send({.group = "ring", .participant = 0, .group_size = 2, .peer = workers}, mine[0])->wait();
  const std::string nowhere_message = "send 'ring' (instance 0) to worker " + std::to_string(workers) + ": there are " +
                                      std::to_string(workers) + " workers (this is worker " + std::to_string(rank) + ")";
  if (nowhere.message() != nowhere_message) fail("a send to a worker that is not there gave '" + nowhere.message() + "'");
}

void check_errors(WorkerCommunicator& collective) {
  std::vector<Tensor> buffers = {filled(DType::f32, 4, 0, 0), filled(DType::f32, 4, 1, 0)};
  const std::vector<Status> outside = for_each_participant([&](int p, CollectiveDone done) {
    collective.broadcast(call_of("broadcast_errors", p), kLocal * workers, buffers[p])->then(std::move(done));
  });
  const std::string root_message = "broadcast 'broadcast_errors': root " + std::to_string(kLocal * workers) + " is not one of the " +
                                   std::to_string(kLocal * workers) + " participants across the workers";
  for (const Status& s : outside) {
    if (s.message() != root_message) fail("a root outside the participants gave '" + s.message() + "'");
  }
  // Participant 1 never comes: participant 0's local meeting fails at its deadline.
  std::vector<Tensor> rows = {Tensor::empty(host_allocator(), DType::f32, {1, 2})};
  std::vector<Tensor> gathered = {Tensor::empty(host_allocator(), DType::f32, {2 * workers, 2})};
  CollectiveCall lonely = call_of("all_gather_unmet", 0);
  lonely.deadline = deadline_after(std::chrono::milliseconds(200));
  std::promise<Status> result;
  collective.all_gather(lonely, rows, gathered)->then([&result](Status s) { result.set_value(std::move(s)); });
  const Status unmet = result.get_future().get();
  if (unmet.code() != mirra::graph::StatusCode::deadline_exceeded ||
      !unmet.message().starts_with("all_gather 'all_gather_unmet' (instance 1): participant 1 of 2 did not arrive within ")) {
    fail("a missing local participant gave '" + unmet.message() + "'");
  }
}

}  // namespace

int main() {
  auto opened = open_mpi_communicator();
  if (!opened.ok()) fail(opened.status().message());
  std::shared_ptr<WorkerCommunicator> collective = *opened;
  workers = collective->world_size();
  rank = collective->rank();
  const std::vector<std::string> groups = {"all_reduce_sum", "all_reduce_mean", "reduce_scatter", "all_gather",
                                           "broadcast_last", "broadcast_first", "broadcast_errors", "all_gather_unmet", "ring"};
  if (Status prepared = collective->prepare(groups); !prepared.ok()) fail(prepared.message());
  check_all_reduce(*collective, DType::f64, Reduction::sum, "all_reduce_sum");
  check_all_reduce(*collective, DType::f32, Reduction::mean, "all_reduce_mean");
  check_reduce_scatter(*collective);
  check_all_gather(*collective);
  check_broadcast(*collective, kLocal * workers - 1, "broadcast_last");
  check_broadcast(*collective, 0, "broadcast_first");
  check_send_and_recv(*collective);
  check_errors(*collective);
  std::printf("worker %d: ok\n", rank);
  std::fflush(stdout);
  return 0;
}
