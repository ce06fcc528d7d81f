// oneDNN engine, primitive cache, threads per call and execution.
#include "ops/cpu/dnnl_engine.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/tensor.h"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
// OpenMP's C entry point (libgomp, which oneDNN is built against); declared here rather than through
// <omp.h>, which only GCC's include path has.
extern "C" void omp_set_num_threads(int threads);
#elif DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB
#include <oneapi/tbb/task_arena.h>
#endif

namespace mirra::ops::cpu {

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void with_dnnl_threads(int threads, const std::function<void()>& call) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  thread_local int team = 0;
  if (team != threads) {
    omp_set_num_threads(threads);
    team = threads;
  }
#elif DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB
  if (threads == 1 && tbb::this_task_arena::max_concurrency() > 1) {
    thread_local tbb::task_arena alone(1, 1);
    alone.execute(call);
    return;
  }
#endif
  call();
}

dnnl::primitive_attr dnnl_user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void DnnlPrimitive::relayout(int arg, const dnnl::memory::desc& given, const dnnl::memory::desc& wanted, bool output) {
  if (given == wanted) return;
  const dnnl::engine& engine = dnnl_engine();
  const dnnl::reorder::primitive_desc pd =
      output ? dnnl::reorder::primitive_desc(engine, wanted, engine, given)
             : dnnl::reorder::primitive_desc(engine, given, engine, wanted);
  relayouts.emplace(arg, Relayout{wanted, dnnl::reorder(pd), output});
}

std::string dnnl_key(std::string_view kind, std::initializer_list<int64_t> numbers) {
  std::string key(kind);
  for (int64_t n : numbers) {
    key += ',';
    key += std::to_string(n);
  }
  return key;
}

graph::Expected<std::unique_ptr<runtime::KernelState>> prepare_dnnl_kernel(const graph::Node& /*node*/,
                                                                         const runtime::Device& /*device*/) {
  return std::unique_ptr<runtime::KernelState>(std::make_unique<DnnlKernelState>());
}

graph::Expected<std::shared_ptr<const DnnlPrimitive>> cached_dnnl_primitive(DnnlPrimitiveCache& cache,
                                                                           const std::string& key,
                                                                           const std::function<DnnlPrimitive()>& make,
                                                                           const runtime::Device& device, int threads) {
  if (std::shared_ptr<const DnnlPrimitive> found = cache.find(key)) return found;
  std::shared_ptr<const DnnlPrimitive> built;
  try {
    with_dnnl_threads(threads > 0 ? threads : device.intra_op_threads(),
                      [&] { built = std::make_shared<const DnnlPrimitive>(make()); });
  } catch (const dnnl::error& e) {
    return graph::internal_error("oneDNN cannot build " + key + ": " + e.what());
  }
  return cache.insert(key, std::move(built));
}

namespace {

dnnl::memory temporary(const dnnl::memory::desc& desc, const runtime::Device& device, std::vector<runtime::Tensor>& keep) {
  keep.push_back(runtime::Tensor::empty(device.allocator(), graph::DType::u8,
                                        runtime::TensorShape{static_cast<int64_t>(desc.get_size())}));
  return dnnl::memory(desc, dnnl_engine(), keep.back().mutable_raw_data());
}

}  // namespace

graph::Status dnnl_execute(const DnnlPrimitive& primitive, std::unordered_map<int, dnnl::memory> args,
                           const runtime::Device& device, int threads) {
  try {
    with_dnnl_threads(threads > 0 ? threads : device.intra_op_threads(), [&] {
      std::vector<runtime::Tensor> buffers;  // temporaries, alive until the stream is done
      thread_local dnnl::stream stream(dnnl_engine());  // one per thread: a step makes many calls
      std::vector<std::pair<const DnnlPrimitive::Relayout*, std::pair<dnnl::memory, dnnl::memory>>> outputs;
      for (const auto& [arg, relayout] : primitive.relayouts) {
        dnnl::memory& given = args.at(arg);
        dnnl::memory wanted = temporary(relayout.wanted, device, buffers);
        if (relayout.output) {
          outputs.push_back({&relayout, {wanted, given}});
        } else {
          relayout.reorder.execute(stream, given, wanted);
        }
        given = wanted;
      }
      if (primitive.scratchpad.get_size() > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD, temporary(primitive.scratchpad, device, buffers));
      }
      primitive.primitive.execute(stream, args);
      for (auto& [relayout, from_to] : outputs) relayout->reorder.execute(stream, from_to.first, from_to.second);
      stream.wait();
    });
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN: ") + e.what());
  }
  return graph::Status();
}

}  // namespace mirra::ops::cpu
