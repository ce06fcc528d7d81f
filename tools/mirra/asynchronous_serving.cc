// serve_asynchronously: a thread per worker, each step of its worker in five parts: what the reads
// need from the worker (the ids of its lookups; the communicator), the reads (session, shared lock),
// the sends and receives (the communicator, no lock), the updates (session, the lock alone).
//
// Note [Transfers outside the session]
// The loop moves its worker's values through the communicator itself, with the groups, peers and
// deadlines of the part's Send and Recv nodes, and the loop's step as their instance (no other run
// meets those groups), rather than running those nodes: a session's runs share its task arena, whose
// slots are its threads, and a run that waited there for a worker's gradient could hold up the other
// workers' runs (a dead worker's, until its deadline). The session runs only what computes: the reads
// and the updates.
#include "tools/mirra/asynchronous_serving.h"

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

namespace mirra::runner {

namespace {

// Transfer node `node`'s half of its group's execution `instance` (participant 0 sends, 1 receives).
runtime::CollectiveCall transfer_call(const graph::Node& node, int64_t instance, int participant) {
  return {.group = graph::checked_attr<std::string>(node, "group"),
          .instance = instance,
          .participant = participant,
          .group_size = 2,
          .peer = static_cast<int>(graph::checked_attr<int64_t>(node, "peer_task")),
          .deadline = runtime::deadline_after(std::chrono::milliseconds(graph::checked_attr<int64_t>(node, "timeout_ms")))};
}

// Waits for every one of `works`, and returns the first failure (all of them have ended by then).
graph::Status wait_all(const std::vector<std::shared_ptr<runtime::Work>>& works) {
  graph::Status first;
  for (const auto& work : works) {
    graph::Status status = work->wait();
    if (first.ok() && !status.ok()) first = std::move(status);
  }
  return first;
}

// The value a Recv node received, checked against the type it declares.
graph::Status check_received(const graph::Node& recv, const runtime::Tensor& value) {
  const graph::TensorType& declared = recv.outputs[0];
  if (value.dtype() == declared.dtype && declared.shape.accepts(value.shape().dims())) return graph::Status();
  return graph::invalid_argument("'" + recv.name + "' received " + value.type_string() + ", not " + declared.to_string());
}

// Receives what `recvs` would at their groups' execution `instance` into `received`, by node name,
// each checked against its declared type, once `others` (sends under way) have ended too.
graph::Status receive(const graph::Graph& g, runtime::Communicator& transfers, const std::vector<graph::NodeId>& recvs,
                      int64_t instance, std::vector<std::shared_ptr<runtime::Work>> others, runtime::Feeds& received) {
  std::vector<runtime::Tensor> values(recvs.size());
  for (size_t i = 0; i < recvs.size(); ++i) others.push_back(transfers.recv(transfer_call(g.node(recvs[i]), instance, 1), values[i]));
  MIRRA_RETURN_IF_ERROR(wait_all(others));
  for (size_t i = 0; i < recvs.size(); ++i) {
    const graph::Node& recv = g.node(recvs[i]);
    MIRRA_RETURN_IF_ERROR(check_received(recv, values[i]));
    received.insert_or_assign(recv.name, std::move(values[i]));
  }
  return graph::Status();
}

// One worker's steps; `served` counts those done.
graph::Status serve_worker(runtime::Session& session, runtime::Communicator& transfers, const strategies::WorkerLoop& loop,
                           int64_t steps, std::shared_mutex& variables, int64_t& served) {
  const graph::Graph& g = session.graph();
  for (; served < steps; ++served) {
    runtime::Feeds received;  // by Recv node
    MIRRA_RETURN_IF_ERROR(receive(g, transfers, loop.pull_recvs, served, {}, received));
    std::vector<runtime::Tensor> pulled;
    {
      const std::shared_lock reading(variables);
      MIRRA_ASSIGN_OR_RETURN(const std::vector<runtime::Tensor> values, session.run(received, loop.pulled));
      for (const runtime::Tensor& value : values) pulled.push_back(runtime::host_copy(value));  // the variable's next update leaves it as it is
    }
    std::vector<std::shared_ptr<runtime::Work>> sends;
    for (size_t i = 0; i < loop.sends.size(); ++i) {
      sends.push_back(transfers.send(transfer_call(g.node(loop.sends[i]), served, 0), pulled[i]));
    }
    MIRRA_RETURN_IF_ERROR(receive(g, transfers, loop.recvs, served, std::move(sends), received));
    if (loop.apply != graph::kInvalidNode) {
      const std::unique_lock updating(variables);
      const std::vector<graph::NodeId> apply = {loop.apply};
      MIRRA_RETURN_IF_ERROR(session.run(received, {}, apply).status());
    }
  }
  return graph::Status();
}

}  // namespace

std::vector<ServedWorker> serve_asynchronously(runtime::Session& session, runtime::Communicator& transfers,
                                               const std::vector<strategies::WorkerLoop>& loops, int64_t steps) {
  std::shared_mutex variables;
  std::vector<ServedWorker> served(loops.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < loops.size(); ++i) {
    served[i].task = loops[i].worker_task;
    threads.emplace_back([&, i] {
      const graph::Status status = serve_worker(session, transfers, loops[i], steps, variables, served[i].steps);
      if (!status.ok()) served[i].status = status.with_context("its step " + std::to_string(served[i].steps + 1));
    });
  }
  for (std::thread& thread : threads) thread.join();
  return served;
}

}  // namespace mirra::runner
