// build_info: the version and the optional parts this build has, and the libraries it runs with.
#include "ops/build_info.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/tbb/version.h>

#include <sstream>
#include <string_view>

#include "graph/version.h"
#include "runtime/collectives/worker_communicator.h"
#include "runtime/gpu_devices.h"

namespace mirra::ops {

namespace {

// "OpenBLAS 0.3.21" from OpenBLAS's configuration string ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...").
std::string openblas_version() {
  const std::string_view config = openblas_get_config();
  const size_t end = config.find(' ', config.find(' ') + 1);
  return std::string(config.substr(0, end));
}

// What oneDNN parallelises with, as its version reports it.
const char* dnnl_threading(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "oneTBB";
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "unknown threading";
  }
}

}  // namespace

std::string onednn_description() {
  const dnnl_version_t* dnnl = dnnl_version();
  return "oneDNN " + std::to_string(dnnl->major) + "." + std::to_string(dnnl->minor) + "." +
         std::to_string(dnnl->patch) + " (" + dnnl_threading(dnnl->cpu_runtime) + ")";
}

std::string build_info() {
  std::ostringstream out;
  out << "mirra " << version() << "\n";
  if (runtime::built_with_cuda()) {
    const runtime::GpuSoftware software = runtime::gpu_software();
    const auto or_none = [](const std::string& v) { return v.empty() ? std::string("none") : v; };
    out << "CUDA backend: on (CUDA runtime " << or_none(software.runtime) << ", cuBLAS " << or_none(software.cublas)
        << ", cuDNN " << or_none(software.cudnn) << ", NCCL " << or_none(software.nccl) << ")\n";
  } else {
    out << "CUDA backend: off\n";
  }
  out << "MPI (multi_worker_mirrored): " << (runtime::built_with_mpi() ? "on" : "off") << "\n";
  out << onednn_description() << ", oneTBB " << TBB_runtime_version()
      << ", " << openblas_version() << "\n";
  return out.str();
}

}  // namespace mirra::ops
