// scaling_svg: axes, one polyline per algorithm and measure, a legend.
#include "simulate/scaling_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace mirra::simulate {

namespace {

constexpr double kWidth = 720, kHeight = 440, kLeft = 70, kRight = 190, kTop = 50, kBottom = 60;

std::string format(const char* pattern, double a, double b = 0) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, a, b);
  return text;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string scaling_svg(const std::vector<ScalingPoint>& points, const std::string& title) {
  int most = 1;
  for (const ScalingPoint& p : points) most = std::max(most, p.devices);
  const double span = std::max(1.0, std::log2(static_cast<double>(most)));
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto x = [&](int devices) { return kLeft + std::log2(static_cast<double>(devices)) / span * plot_w; };
  const auto y = [&](double share) { return kTop + (1 - std::clamp(share, 0.0, 1.0)) * plot_h; };
  std::string svg = format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
                           "font-size=\"12\">\n",
                           kWidth, kHeight);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += format("<text x=\"%g\" y=\"24\" font-size=\"15\">", kLeft) + escaped(title) + "</text>\n";
  for (int tick = 0; tick <= 4; ++tick) {  // the share axis, 0 to 1
    const double share = tick / 4.0;
    svg += format("<line x1=\"%g\" x2=\"%g\" ", kLeft, kLeft + plot_w) + format("y1=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", y(share), y(share));
    svg += format("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">", kLeft - 8, y(share) + 4) + format("%.2f", share) + "</text>\n";
  }
  std::vector<int> counts;
  for (const ScalingPoint& p : points) {
    if (std::find(counts.begin(), counts.end(), p.devices) == counts.end()) counts.push_back(p.devices);
  }
  for (int devices : counts) {
    svg += format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", x(devices), kTop + plot_h + 18) + std::to_string(devices) + "</text>\n";
  }
  svg += format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">devices</text>\n", kLeft + plot_w / 2, kHeight - 18);
  svg += format("<rect x=\"%g\" y=\"%g\" ", kLeft, kTop) + format("width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"black\"/>\n", plot_w, plot_h);
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  std::map<Algorithm, std::pair<std::string, std::string>> lines;  // efficiency, exposed share
  for (const ScalingPoint& p : points) {
    auto& [efficiency, exposed] = lines[p.algorithm];
    const double share = p.times.step > 0 ? p.times.exposed_communication / p.times.step : 0;
    efficiency += format("%.1f,%.1f ", x(p.devices), y(p.efficiency));
    exposed += format("%.1f,%.1f ", x(p.devices), y(share));
  }
  int row = 0;
  for (const auto& [algorithm, line] : lines) {
    const char* colour = colours[row % 4];
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\" points=\"" + line.first + "\"/>\n";
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\" stroke-dasharray=\"6 4\" points=\"" +
           line.second + "\"/>\n";
    const double ly = kTop + 10 + row * 40;
    const double lx = kLeft + plot_w + 15;
    svg += format("<line x1=\"%g\" x2=\"%g\" ", lx, lx + 24) + format("y1=\"%g\" y2=\"%g\" stroke=\"", ly, ly) + colour +
           "\" stroke-width=\"2\"/>\n";
    svg += format("<text x=\"%g\" y=\"%g\">", lx + 30, ly + 4) + std::string(algorithm_name(algorithm)) + ": efficiency</text>\n";
    svg += format("<line x1=\"%g\" x2=\"%g\" ", lx, lx + 24) + format("y1=\"%g\" y2=\"%g\" stroke=\"", ly + 16, ly + 16) + colour +
           "\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n";
    svg += format("<text x=\"%g\" y=\"%g\">", lx + 30, ly + 20) + "exposed communication</text>\n";
    ++row;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mirra::simulate
