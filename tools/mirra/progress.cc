// ProgressReporter: a carriage-return bar on terminals, a line per epoch elsewhere.
#include "tools/mirra/progress.h"

#include <string>

namespace mirra::runner {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  return text;
}

}  // namespace

ProgressReporter::ProgressReporter(std::FILE* out, bool terminal, int64_t total_epochs)
    : out_(out), terminal_(terminal), total_epochs_(total_epochs) {}

void ProgressReporter::on_step(const runtime::training::StepMetrics& step) {
  const auto now = std::chrono::steady_clock::now();
  if (step.epoch != epoch_) {
    epoch_ = step.epoch;
    epoch_start_ = now;
    epoch_steps_ = 0;
    loss_ = step.loss;
  }
  ++epoch_steps_;
  loss_ = 0.9 * loss_ + 0.1 * step.loss;
  if (!terminal_ || out_ == nullptr) return;
  const bool last = step.batch + 1 >= step.batches_in_epoch;
  if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  const double per_step = elapsed / static_cast<double>(epoch_steps_);
  const int64_t left = step.batches_in_epoch - step.batch - 1;
  constexpr int kWidth = 30;
  const int filled = step.batches_in_epoch > 0 ? static_cast<int>(kWidth * (step.batch + 1) / step.batches_in_epoch) : 0;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
  const std::string epochs = total_epochs_ > 0 ? "/" + std::to_string(total_epochs_) : "";
  std::fprintf(out_, "\r\033[Kepoch %lld%s [%s] %lld/%lld  loss %.4f  %.0f ex/s  ETA %s", static_cast<long long>(step.epoch + 1),
               epochs.c_str(), bar.c_str(), static_cast<long long>(step.batch + 1),
               static_cast<long long>(step.batches_in_epoch), loss_, step.examples_per_second,
               clock_text(per_step * static_cast<double>(left)).c_str());
  std::fflush(out_);
}

void ProgressReporter::on_epoch(const runtime::training::EpochMetrics& epoch) {
  if (out_ == nullptr) return;
  if (terminal_) std::fputs("\r\033[K", out_);
  const std::string epochs = total_epochs_ > 0 ? "/" + std::to_string(total_epochs_) : "";
  std::fprintf(out_, "epoch %lld%s: %lld steps, loss %.4f", static_cast<long long>(epoch.epoch + 1), epochs.c_str(),
               static_cast<long long>(epoch.steps), epoch.mean_loss);
  if (epoch.accuracy) std::fprintf(out_, ", accuracy %.4f", *epoch.accuracy);
  std::fprintf(out_, ", %.0f examples/s, %.1f s", epoch.examples_per_second, epoch.seconds);
  for (const auto& [name, value] : epoch.metrics) std::fprintf(out_, ", %s %.4g", name.c_str(), value);
  if (epoch.evaluation) {
    std::fprintf(out_, ";");
    if (epoch.evaluation->accuracy) std::fprintf(out_, " test accuracy %.4f,", *epoch.evaluation->accuracy);
    std::fprintf(out_, " test loss %.4f", epoch.evaluation->mean_loss);
    for (const auto& [name, value] : epoch.evaluation->metrics) std::fprintf(out_, ", test %s %.4g", name.c_str(), value);
  }
  std::fputc('\n', out_);
  std::fflush(out_);
  epoch_ = -1;
}

}  // namespace mirra::runner
