// InProcessCommunicator: the operations over buffers in one address space, run by the last participant
// to reach the rendezvous.
#include "runtime/collectives/in_process_communicator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include "graph/float16.h"
#include "runtime/allocator.h"
#include "runtime/vector_clones.h"

namespace mirra::runtime {

using graph::Status;
using Kind = InProcessCommunicator::Kind;
using Arrival = InProcessCommunicator::Arrival;

namespace {

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_gather: return "all_gather";
    case Kind::broadcast: return "broadcast";
    case Kind::transfer: return "transfer";
  }
  return "collective";
}

std::string describe(Kind kind, const std::string& group, int64_t instance) {
  return std::string(kind_name(kind)) + " '" + group + "' (instance " + std::to_string(instance) + ")";
}

// ---- Checks: every participant must describe the same collective ----

bool same_type(const Tensor& a, const Tensor& b) { return a.dtype() == b.dtype() && a.shape() == b.shape(); }

// f32 and f64; an all-reduce also bf16 (summed in f32, Note [In-process all-reduce]).
Status check_reducible(const Tensor& t, Kind kind) {
  const graph::DType d = t.dtype();
  if (d == graph::DType::f32 || d == graph::DType::f64 || (d == graph::DType::bf16 && kind == Kind::all_reduce)) return Status();
  return graph::invalid_argument("cannot reduce " + t.type_string() +
                                 (kind == Kind::all_reduce ? " (f32, f64 or bf16)" : " (f32 or f64)"));
}

Status check_arrivals(const std::vector<Arrival>& arrivals) {
  const Arrival& first = arrivals[0];
  for (size_t p = 0; p < arrivals.size(); ++p) {
    const Arrival& a = arrivals[p];
    const std::string who = "participant " + std::to_string(p);
    if (a.kind != first.kind) {
      return graph::invalid_argument(who + " calls " + std::string(kind_name(a.kind)) + " where participant 0 calls " +
                                     std::string(kind_name(first.kind)));
    }
    if (a.reduction != first.reduction || a.root != first.root) {
      return graph::invalid_argument(who + " passes another reduction or root than participant 0");
    }
    if (a.inputs.size() != first.inputs.size() || a.outputs.size() != a.inputs.size()) {
      return graph::invalid_argument(who + " passes " + std::to_string(a.inputs.size()) + " inputs and " +
                                     std::to_string(a.outputs.size()) + " outputs where participant 0 passes " +
                                     std::to_string(first.inputs.size()));
    }
    for (size_t j = 0; j < a.inputs.size(); ++j) {
      const Tensor& in = a.inputs[j];
      const Tensor& out = a.outputs[j];
      const Tensor& in0 = first.inputs[j];
      if (first.kind == Kind::all_gather) {
        bool stacks = in.dtype() == in0.dtype() && in.rank() == in0.rank() && in.rank() > 0;
        for (int d = 1; stacks && d < in.rank(); ++d) stacks = in.dim(d) == in0.dim(d);
        if (!stacks) {
          return graph::invalid_argument(who + " holds " + in.type_string() + ", which does not stack with participant 0's " +
                                         in0.type_string());
        }
        continue;
      }
      if (!same_type(in, in0)) {
        return graph::invalid_argument(who + " holds " + in.type_string() + " where participant 0 holds " +
                                       in0.type_string());
      }
      if (first.kind == Kind::all_reduce || first.kind == Kind::reduce_scatter) MIRRA_RETURN_IF_ERROR(check_reducible(in, first.kind));
      if (first.kind == Kind::reduce_scatter) {
        const int64_t share = participant_share(in.num_elements(), static_cast<int64_t>(arrivals.size()),
                                                static_cast<int64_t>(p));
        if (out.dtype() != in.dtype() || out.num_elements() != share) {
          return graph::invalid_argument(who + "'s output " + out.type_string() + " does not hold its share of " +
                                         std::to_string(share) + " elements");
        }
      } else if (first.kind == Kind::all_reduce || first.kind == Kind::broadcast) {
        if (!same_type(out, in)) {
          return graph::invalid_argument(who + "'s output " + out.type_string() + " does not match its input " +
                                         in.type_string());
        }
      }
    }
  }
  if (first.kind == Kind::all_gather) {
    for (size_t j = 0; j < first.inputs.size(); ++j) {
      int64_t rows = 0;
      for (const Arrival& a : arrivals) rows += a.inputs[j].dim(0);
      TensorShape stacked = first.inputs[j].shape();
      stacked.set_dim(0, rows);
      for (size_t p = 0; p < arrivals.size(); ++p) {
        const Tensor& out = arrivals[p].outputs[j];
        if (out.dtype() != first.inputs[j].dtype() || !(out.shape() == stacked)) {
          return graph::invalid_argument("participant " + std::to_string(p) + "'s output " + out.type_string() +
                                         " cannot hold the " + std::to_string(rows) + " gathered rows");
        }
      }
    }
  }
  if (first.kind == Kind::broadcast && (first.root < 0 || first.root >= static_cast<int>(arrivals.size()))) {
    return graph::invalid_argument("root " + std::to_string(first.root) + " is not a participant");
  }
  return Status();
}

// ---- The operations ----

// Note [In-process all-reduce]
// The elements are cut into chunks that oneTBB spreads over its threads. Within a chunk, blocks of
// kBlock elements (8-16 KiB, in L1 next to the streaming inputs) are accumulated in participant
// order straight into participant 0's output, which then is copied to the other outputs. So every
// input line is read once and every output line written once: when outputs share their inputs'
// buffers (the executor allows it when nothing else reads them), a line is written back while it is
// still in cache, 2 x participants x size bytes of memory traffic, the bound `mirra bench allreduce`
// holds it against. The order of the sum never depends on the threads, so all participants receive
// the same bits on any machine. bf16 tensors (gradients compressed to half the bytes) are widened
// block by block into an f32 block on the stack, summed there in the same order, and rounded to bf16
// once when written: the sum of the inputs as bf16 values, rounded once.
constexpr int64_t kChunk = 1 << 16;
constexpr int64_t kBlock = 2048;

// The one loop that touches every input byte, cloned for the vector units the machine may have
// (chosen once at load time): AVX-512 sums a bucket about 1.4 times as fast as the baseline x86-64
// build, from memory and more so from the last-level cache. A whole block has a trip count known at
// compile time, vectorised without a remainder loop; the tail of a tensor takes the plain one. The file
// is compiled at -O3 (runtime/CMakeLists.txt), so the loops of any length vectorise too: the tails and
// the bf16 widening and rounding, which at -O2 were scalar.
MIRRA_VECTOR_CLONES void add_block(float* __restrict acc, const float* __restrict x) {
  for (int64_t i = 0; i < kBlock; ++i) acc[i] += x[i];
}
MIRRA_VECTOR_CLONES void add_block(double* __restrict acc, const double* __restrict x) {
  for (int64_t i = 0; i < kBlock; ++i) acc[i] += x[i];
}

template <class T>
void add_into(T* acc, const T* x, int64_t count) {
  if (count == kBlock) return add_block(acc, x);
  for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
}

template <class T>
void reduce_range(const std::vector<const T*>& in, T* acc, int64_t begin, int64_t end, Reduction reduction,
                  const std::vector<T*>& copies) {
  const T n = static_cast<T>(in.size());
  for (int64_t first = begin; first < end; first += kBlock) {
    const int64_t count = std::min(kBlock, end - first);
    T* a = acc + first;
    if (a != in[0] + first) std::memcpy(a, in[0] + first, static_cast<size_t>(count) * sizeof(T));
    for (size_t r = 1; r < in.size(); ++r) add_into(a, in[r] + first, count);
    if (reduction == Reduction::mean) {
      for (int64_t i = 0; i < count; ++i) a[i] /= n;
    }
    for (T* copy : copies) {
      if (copy + first != a) std::memcpy(copy + first, a, static_cast<size_t>(count) * sizeof(T));
    }
  }
}

// reduce_range for bf16: summed in an f32 block, rounded once per output element.
void reduce_range(const std::vector<const graph::bfloat16*>& in, graph::bfloat16* acc, int64_t begin, int64_t end,
                  Reduction reduction, const std::vector<graph::bfloat16*>& copies) {
  const float n = static_cast<float>(in.size());
  float sum[kBlock];
  for (int64_t first = begin; first < end; first += kBlock) {
    const int64_t count = std::min(kBlock, end - first);
    for (int64_t i = 0; i < count; ++i) sum[i] = static_cast<float>(in[0][first + i]);
    for (size_t r = 1; r < in.size(); ++r) {
      for (int64_t i = 0; i < count; ++i) sum[i] += static_cast<float>(in[r][first + i]);
    }
    if (reduction == Reduction::mean) {
      for (int64_t i = 0; i < count; ++i) sum[i] /= n;
    }
    for (int64_t i = 0; i < count; ++i) acc[first + i] = graph::bfloat16(sum[i]);
    for (graph::bfloat16* copy : copies) {
      if (copy != acc) std::memcpy(copy + first, acc + first, static_cast<size_t>(count) * sizeof(graph::bfloat16));
    }
  }
}

// body(i) for every i in [0, n), on oneTBB threads that may touch what the calling participant may
// (its device's memory when it runs on a device's stream).
template <class Body>
void for_each_in_parallel(size_t n, const Body& body) {
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<size_t>(0, n, 1),
                            with_memory_access_of_caller([&](const oneapi::tbb::blocked_range<size_t>& range) {
                              for (size_t i = range.begin(); i < range.end(); ++i) body(i);
                            }));
}

// Chunks of tensors of one bucket: (tensor, first element, end element).
struct Chunk {
  size_t tensor;
  int64_t begin, end;
};

template <class T>
void run_all_reduce_tensor(const std::vector<Arrival>& arrivals, size_t j, int64_t begin, int64_t end,
                           Reduction reduction) {
  std::vector<const T*> in;
  std::vector<T*> copies;
  for (const Arrival& a : arrivals) in.push_back(a.inputs[j].template data<T>());
  for (size_t p = 1; p < arrivals.size(); ++p) copies.push_back(arrivals[p].outputs[j].template mutable_data<T>());
  T* acc = arrivals[0].outputs[j].template mutable_data<T>();
  reduce_range(in, acc, begin, end, reduction, copies);  // bf16's overload, or the template
}

void run_all_reduce(const std::vector<Arrival>& arrivals) {
  const Arrival& first = arrivals[0];
  std::vector<Chunk> chunks;
  for (size_t j = 0; j < first.inputs.size(); ++j) {
    const int64_t n = first.inputs[j].num_elements();
    for (int64_t begin = 0; begin < n; begin += kChunk) chunks.push_back({j, begin, std::min(n, begin + kChunk)});
  }
  for_each_in_parallel(chunks.size(), [&](size_t c) {
    const Chunk& chunk = chunks[c];
    const graph::DType dtype = first.inputs[chunk.tensor].dtype();
    if (dtype == graph::DType::f32) {
      run_all_reduce_tensor<float>(arrivals, chunk.tensor, chunk.begin, chunk.end, first.reduction);
    } else if (dtype == graph::DType::bf16) {
      run_all_reduce_tensor<graph::bfloat16>(arrivals, chunk.tensor, chunk.begin, chunk.end, first.reduction);
    } else {
      run_all_reduce_tensor<double>(arrivals, chunk.tensor, chunk.begin, chunk.end, first.reduction);
    }
  });
}

// Participant p's share of each reduction lands in its output; the others' sums are not formed.
void run_reduce_scatter(const std::vector<Arrival>& arrivals) {
  struct ShareChunk {
    size_t tensor = 0, participant = 0;
    int64_t share_begin = 0;  // the participant's share's first element
    int64_t begin = 0, end = 0;
  };
  const int64_t group = static_cast<int64_t>(arrivals.size());
  std::vector<ShareChunk> chunks;
  for (size_t j = 0; j < arrivals[0].inputs.size(); ++j) {
    const int64_t n = arrivals[0].inputs[j].num_elements();
    int64_t offset = 0;
    for (int64_t p = 0; p < group; ++p) {
      const int64_t share = participant_share(n, group, p);
      for (int64_t begin = 0; begin < share; begin += kChunk) {
        chunks.push_back({j, static_cast<size_t>(p), offset, offset + begin, offset + std::min(share, begin + kChunk)});
      }
      offset += share;
    }
  }
  for_each_in_parallel(chunks.size(), [&](size_t c) {
    const ShareChunk& chunk = chunks[c];
    const auto run = [&]<class T>() {
      std::vector<const T*> in;
      for (const Arrival& a : arrivals) in.push_back(a.inputs[chunk.tensor].template data<T>());
      // The output holds the share from its first element: shift it so element indices line up.
      T* out = arrivals[chunk.participant].outputs[chunk.tensor].template mutable_data<T>() - chunk.share_begin;
      reduce_range<T>(in, out, chunk.begin, chunk.end, arrivals[0].reduction, {});
    };
    if (arrivals[0].inputs[chunk.tensor].dtype() == graph::DType::f32) {
      run.template operator()<float>();
    } else {
      run.template operator()<double>();
    }
  });
}

void run_all_gather(const std::vector<Arrival>& arrivals) {
  const size_t group = arrivals.size();
  for (size_t j = 0; j < arrivals[0].inputs.size(); ++j) {
    for_each_in_parallel(group * group, [&](size_t task) {
      const size_t to = task / group, from = task % group;
      size_t offset = 0;
      for (size_t p = 0; p < from; ++p) offset += arrivals[p].inputs[j].byte_size();
      const Tensor& in = arrivals[from].inputs[j];
      auto* out = static_cast<std::byte*>(arrivals[to].outputs[j].mutable_raw_data());
      if (in.byte_size() > 0) std::memcpy(out + offset, in.raw_data(), in.byte_size());
    });
  }
}

void run_broadcast(const std::vector<Arrival>& arrivals) {
  const Arrival& root = arrivals[static_cast<size_t>(arrivals[0].root)];
  for_each_in_parallel(arrivals.size(), [&](size_t p) {
    for (size_t j = 0; j < root.inputs.size(); ++j) {
      const Tensor& from = root.inputs[j];
      Tensor& to = arrivals[p].outputs[j];
      if (from.byte_size() > 0 && to.raw_data() != from.raw_data()) {
        std::memcpy(to.mutable_raw_data(), from.raw_data(), from.byte_size());
      }
    }
  });
}

// Participant 0's value, copied into participant 1's slot.
Status run_transfer(const std::vector<Arrival>& arrivals) {
  if (arrivals.size() != 2 || arrivals[0].inputs.size() != 1 || arrivals[1].outputs.size() != 1 ||
      !arrivals[0].outputs.empty() || !arrivals[1].inputs.empty() || arrivals[1].kind != Kind::transfer) {
    return graph::invalid_argument("a transfer is participant 0's send and participant 1's receive");
  }
  const Tensor& value = arrivals[0].inputs[0];
  Tensor copy = Tensor::empty(host_allocator(), value.dtype(), value.shape());
  if (value.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), value.raw_data(), value.byte_size());
  arrivals[1].outputs[0] = std::move(copy);
  return Status();
}

Status run_collective(const std::vector<Arrival>& arrivals) {
  if (arrivals[0].kind == Kind::transfer) return run_transfer(arrivals);
  MIRRA_RETURN_IF_ERROR(check_arrivals(arrivals));
  switch (arrivals[0].kind) {
    case Kind::all_reduce: run_all_reduce(arrivals); break;
    case Kind::reduce_scatter: run_reduce_scatter(arrivals); break;
    case Kind::all_gather: run_all_gather(arrivals); break;
    case Kind::broadcast: run_broadcast(arrivals); break;
    case Kind::transfer: break;
  }
  return Status();
}

}  // namespace

void InProcessCommunicator::start_all_reduce(const CollectiveCall& call, Reduction reduction,
                                             std::span<const Tensor> inputs, std::span<Tensor> outputs, CollectiveDone done) {
  arrive(call, {Kind::all_reduce, reduction, 0, inputs, outputs, std::move(done)});
}

void InProcessCommunicator::start_reduce_scatter(const CollectiveCall& call, Reduction reduction,
                                                 std::span<const Tensor> inputs, std::span<Tensor> outputs,
                                                 CollectiveDone done) {
  arrive(call, {Kind::reduce_scatter, reduction, 0, inputs, outputs, std::move(done)});
}

void InProcessCommunicator::start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs,
                                             std::span<Tensor> outputs, CollectiveDone done) {
  arrive(call, {Kind::all_gather, Reduction::sum, 0, inputs, outputs, std::move(done)});
}

void InProcessCommunicator::start_broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done) {
  arrive(call, {Kind::broadcast, Reduction::sum, root, {&buffer, 1}, {&buffer, 1}, std::move(done)});
}

void InProcessCommunicator::start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done) {
  arrive(call, {Kind::transfer, Reduction::sum, 0, {&value, 1}, {}, std::move(done)});
}

void InProcessCommunicator::start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done) {
  arrive(call, {Kind::transfer, Reduction::sum, 0, {}, {&value, 1}, std::move(done)});
}

void InProcessCommunicator::arrive(const CollectiveCall& call, Arrival arrival) {
  MIRRA_CHECK(arrival.done != nullptr, "a collective call needs a done callback");
  const std::string what = describe(arrival.kind, call.group, call.instance);
  std::optional<std::vector<Arrival>> complete = meetings_.arrive({nullptr, call.group, call.instance}, what, call.participant,
                                                                  call.group_size, call.deadline, std::move(arrival));
  if (!complete) return;  // the last participant to arrive runs it
  Status status = run_collective(*complete);
  if (!status.ok()) status = status.with_context(what);
  for (Arrival& a : *complete) a.done(status);
}

void InProcessCommunicator::abandon(const CollectiveInstance& which, const graph::Status& why) {
  meetings_.abandon({nullptr, which.group, which.instance}, why);
}

}  // namespace mirra::runtime
