// `mirra devices`: the devices this machine offers, like tf.config.list_physical_devices: the CPU
// (model, threads, memory, whether it has bf16 kernels; any number of logical devices cpu:N and
// cpu_async:N run on it) and each
// GPU (name, memory, compute capability, multiprocessors) with the driver, CUDA runtime, cuBLAS,
// cuDNN and NCCL versions, or why there is no GPU. --json prints the same as one JSON object.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/info.h>

#include "ops/mixed_precision.h"
#include "runtime/gpu_devices.h"
#include "tools/mirra/commands.h"

namespace mirra::runner {

namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

int run_devices(const DevicesCommand& command) {
  const int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  const int threads = oneapi::tbb::info::default_concurrency();
  const graph::Expected<std::vector<runtime::GpuInfo>> gpus = runtime::list_gpus();
  const runtime::GpuSoftware software = runtime::gpu_software();
  if (command.json) {
    nlohmann::json out = {{"cpu",
                           {{"name", cpu_model_name()},
                            {"threads", threads},
                            {"memory_bytes", memory},
                            {"bf16_kernels", ops::cpu_has_bf16_kernels()}}},
                          {"gpus", nlohmann::json::array()},
                          {"cuda_backend", runtime::built_with_cuda()},
                          {"software",
                           {{"driver", software.driver},
                            {"cuda_runtime", software.runtime},
                            {"cublas", software.cublas},
                            {"cudnn", software.cudnn},
                            {"nccl", software.nccl}}}};
    if (gpus.ok()) {
      for (const runtime::GpuInfo& gpu : *gpus) {
        out["gpus"].push_back({{"device", "gpu:" + std::to_string(gpu.ordinal)},
                               {"name", gpu.name},
                               {"memory_bytes", gpu.memory_bytes},
                               {"compute_capability", std::to_string(gpu.compute_major) + "." + std::to_string(gpu.compute_minor)},
                               {"multiprocessors", gpu.multiprocessors}});
      }
    } else {
      out["gpu_unavailable"] = gpus.status().message();
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("cpu     %s, %d threads, %.1f GiB (logical devices cpu:N and cpu_async:N)\n", cpu_model_name().c_str(),
              threads, gib(memory));
  std::printf("        bf16 products: %s\n", ops::cpu_has_bf16_kernels()
                                                ? "oneDNN's bf16 kernels"
                                                : "computed in f32 (oneDNN has no bf16 kernels for this CPU)");
  if (!gpus.ok()) {
    std::printf("gpu     none: %s\n", gpus.status().message().c_str());
  } else {
    for (const runtime::GpuInfo& gpu : *gpus) {
      std::printf("gpu:%-3d %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n", gpu.ordinal, gpu.name.c_str(),
                  gib(gpu.memory_bytes), gpu.compute_major, gpu.compute_minor, gpu.multiprocessors);
    }
  }
  if (runtime::built_with_cuda()) {
    const auto or_none = [](const std::string& version) { return version.empty() ? std::string("none") : version; };
    std::printf("cuda    driver %s, runtime %s, cuBLAS %s, cuDNN %s, NCCL %s\n", or_none(software.driver).c_str(),
                or_none(software.runtime).c_str(), or_none(software.cublas).c_str(), or_none(software.cudnn).c_str(),
                or_none(software.nccl).c_str());
  }
  return 0;
}

}  // namespace mirra::runner
