// One task of `mpirun -np 2 task_worker`: a graph over two tasks, cut by ops::partition_by_task, each
// worker's session running its own task's part over MPI. Task 0 feeds x and computes y = 2x; task 1
// reads y and computes w = (y + 1) y; task 0 reads w back and fetches w - x: values cross both ways,
// every step. Checked against a plain loop for 3 steps; prints "task t: ok" and exits 0, or names the
// mismatch and exits 1.
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/task_partition.h"
#include "runtime/collectives/worker_communicator.h"
#include "runtime/session.h"

namespace {

using namespace mirra;
using runtime::Tensor;

int task = 0;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "task %d: %s\n", task, what.c_str());
  std::exit(1);
}

}  // namespace

int main() {
  auto opened = runtime::open_mpi_communicator();
  if (!opened.ok()) fail(opened.status().message());
  std::shared_ptr<runtime::WorkerCommunicator> workers = *opened;
  task = workers->rank();
  if (workers->world_size() != 2) fail("run it as two workers");

  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 0, 0});
  const auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 2});
  const auto y = ops::mul(b, x, ops::scalar(b, 2.0f));
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 0, 1});
  const auto w = ops::mul(b, ops::add(b, y, ops::scalar(b, 1.0f)), y);
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 0, 0});
  const auto out = ops::sub(b, w, x);
  if (!b.status().ok()) fail(b.status().message());
  const std::string out_name = g.node(out.node).name;

  auto parts = ops::partition_by_task(g, ops::registry());
  if (!parts.ok()) fail(parts.status().message());
  if (const graph::Status prepared = workers->prepare(ops::transfer_groups(*parts)); !prepared.ok()) fail(prepared.message());
  ops::TaskGraph& mine = parts->at(task);
  runtime::Session session(mine.graph, ops::kernels(), {.threads = 1, .communicators = {workers}, .task = task});
  for (int step = 0; step < 3; ++step) {
    const float v = static_cast<float>(step);
    const Tensor fed = Tensor::from<float>({2, 2}, {v, 1, 2, -3});
    if (task == 1) {
      const auto ran = session.run({}, {}, mine.sends);
      if (!ran.ok()) fail(ran.status().message());
      continue;
    }
    const graph::ValueRef fetch{*mine.graph.find(out_name), 0};
    const auto fetched = session.run({{"x", fed}}, std::span<const graph::ValueRef>(&fetch, 1), mine.sends);
    if (!fetched.ok()) fail(fetched.status().message());
    const std::vector<float> got = (*fetched)[0].to_vector<float>();
    const std::vector<float> given = fed.to_vector<float>();
    for (size_t i = 0; i < given.size(); ++i) {
      const float e = given[i], want = (2 * e + 1) * (2 * e) - e;
      if (got[i] != want) fail("step " + std::to_string(step) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) +
                               ", not " + std::to_string(want));
    }
  }
  std::printf("task %d: ok\n", task);
  std::fflush(stdout);
  return 0;
}
