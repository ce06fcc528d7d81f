// read_measured_costs: a trace's kernel events grouped by node; gaps and overlaps by device track.
#include "simulate/measured_costs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "serialization/file_io.h"
#include "strategies/strategy.h"

namespace mirra::simulate {

namespace {

constexpr double kShortestWaitUs = 20;  // the trace writer's: shorter gaps are the executor's own time

double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

struct Event {
  std::string name;
  double start_us = 0, end_us = 0;
};

}  // namespace

graph::Expected<MeasuredCosts> parse_measured_costs(const std::string& text, const std::string& source) {
  const nlohmann::json trace = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return graph::invalid_argument(source + ": not a Chrome trace (a JSON object with traceEvents) as mirra train --trace writes");
  }
  std::map<int64_t, std::string> track_names;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.contains("args") && e["args"].is_object() &&
        e.contains("tid") && e["tid"].is_number_integer()) {
      track_names[e["tid"].get<int64_t>()] = e["args"].value("name", "");
    }
  }
  std::vector<Event> steps;
  std::map<std::string, std::vector<Event>> kernels_by_track;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number() ||
        !e.contains("tid") || !e["tid"].is_number_integer()) {
      continue;
    }
    const Event event{.name = e.value("name", ""), .start_us = e["ts"].get<double>(),
                      .end_us = e["ts"].get<double>() + e["dur"].get<double>()};
    const std::string& track = track_names[e["tid"].get<int64_t>()];
    if (track == "steps") {
      steps.push_back(event);
    } else if (e.value("cat", "") == "kernel" && track.starts_with("device ")) {
      kernels_by_track[track].push_back(event);
    }
  }
  if (steps.empty()) return graph::invalid_argument(source + ": the trace records no step (no \"steps\" track)");
  std::sort(steps.begin(), steps.end(), [](const Event& a, const Event& b) { return a.start_us < b.start_us; });
  // The first step builds the plans and the primitives: its kernels count only when it is the only one.
  const double counted_from = steps.size() > 1 ? steps[0].end_us : steps[0].start_us;
  MeasuredCosts costs{.source = source};
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i) {
    costs.step_seconds += (steps[i].end_us - steps[i].start_us) * 1e-6;
    ++costs.steps;
  }
  costs.step_seconds /= static_cast<double>(costs.steps);
  std::map<std::string, std::vector<double>> durations;
  std::vector<double> gaps;
  for (auto& [track, events] : kernels_by_track) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.start_us < b.start_us; });
    const bool compute = !track.ends_with(" copies");
    double kernel_us = 0, busy_us = 0, covered_us = counted_from;
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].start_us < counted_from) continue;
      durations[events[i].name].push_back((events[i].end_us - events[i].start_us) * 1e-6);
      if (!compute) continue;
      kernel_us += events[i].end_us - events[i].start_us;
      busy_us += std::max(0.0, events[i].end_us - std::max(events[i].start_us, covered_us));
      covered_us = std::max(covered_us, events[i].end_us);
      if (i == 0 || events[i - 1].start_us < counted_from) continue;
      const double gap = events[i].start_us - events[i - 1].end_us;
      if (gap >= 0 && gap < kShortestWaitUs) gaps.push_back(gap * 1e-6);
    }
    if (busy_us > 0) costs.concurrency = std::max(costs.concurrency, static_cast<int>(std::lround(kernel_us / busy_us)));
  }
  if (durations.empty()) return graph::invalid_argument(source + ": the trace records no kernel of a counted step");
  std::map<std::string, std::vector<double>> twins;
  for (auto& [name, seconds] : durations) {
    int replica = -1;
    std::vector<double>& twin = twins[std::string(strategies::replica_free_name(name, &replica))];
    twin.insert(twin.end(), seconds.begin(), seconds.end());
    costs.kernel_seconds[name] = median(std::move(seconds));
  }
  for (auto& [name, seconds] : twins) costs.twin_seconds[name] = median(std::move(seconds));
  costs.dispatch_seconds = gaps.empty() ? 0 : median(std::move(gaps));
  return costs;
}

const double* measured_kernel_seconds(const MeasuredCosts& costs, const std::string& name) {
  if (const auto own = costs.kernel_seconds.find(name); own != costs.kernel_seconds.end()) return &own->second;
  int replica = -1;
  const auto twin = costs.twin_seconds.find(std::string(strategies::replica_free_name(name, &replica)));
  return twin == costs.twin_seconds.end() ? nullptr : &twin->second;
}

graph::Expected<MeasuredCosts> read_measured_costs(const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(const std::string text, serialization::read_text_file(path, "trace"));
  return parse_measured_costs(text, path);
}

}  // namespace mirra::simulate
