#include "sim/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/text_escape.h"

namespace berth::sim {
namespace {

constexpr double kWidth = 900;
constexpr double kLeft = 70;
constexpr double kRight = 20;
constexpr double kPanelHeight = 220;
constexpr double kTop = 50;
constexpr double kGap = 60;
constexpr std::array<const char*, 6> kColors{"#1f77b4", "#d62728", "#2ca02c",
                                             "#ff7f0e", "#9467bd", "#8c564b"};

// A round step for about `ticks` ticks over [0, max].
double TickStep(double max, int ticks) {
  if (max <= 0) return 1;
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

struct Panel {
  double top = 0;
  std::string label;
  double y_max = 1;
};

// Axes, ticks and grid of one panel over [0, x_max] hours.
std::string Axes(const Panel& p, double x_max, bool x_labels) {
  const double plot_w = kWidth - kLeft - kRight;
  std::string out;
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#444\"/>\n",
      kLeft, p.top, plot_w, kPanelHeight);
  const double ys = TickStep(p.y_max, 5);
  for (double v = 0; v <= p.y_max + 1e-9; v += ys) {
    const double y = p.top + kPanelHeight - v / p.y_max * kPanelHeight;
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft,
        y, kLeft + plot_w, y);
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:g}</text>\n",
        kLeft - 5, y + 4, v);
  }
  const double xs = TickStep(x_max, 8);
  for (double v = 0; v <= x_max + 1e-9; v += xs) {
    const double x = kLeft + v / x_max * plot_w;
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#444\"/>\n", x,
        p.top + kPanelHeight, x, p.top + kPanelHeight + 4);
    if (x_labels) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{:g}</text>\n",
          x, p.top + kPanelHeight + 16, v);
    }
  }
  out += fmt::format(
      "<text x=\"15\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 15 {:.1f})\">{}</text>\n",
      p.top + kPanelHeight / 2, p.top + kPanelHeight / 2, HtmlEscape(p.label));
  return out;
}

// One polyline: per pixel column, the mean of the samples that fall in it.
template <typename Value>
std::string Line(const std::vector<Sample>& samples, TimeMs t0, double x_max_h, const Panel& p,
                 const char* color, Value value) {
  const double plot_w = kWidth - kLeft - kRight;
  const auto columns = static_cast<std::size_t>(plot_w);
  std::vector<double> sum(columns + 1, 0);
  std::vector<int> count(columns + 1, 0);
  for (const auto& s : samples) {
    const double h = static_cast<double>(s.t_ms - t0) / 3.6e6;
    const auto c = static_cast<std::size_t>(
        std::clamp(h / x_max_h * static_cast<double>(columns), 0.0, static_cast<double>(columns)));
    sum[c] += value(s);
    ++count[c];
  }
  std::string points;
  for (std::size_t c = 0; c <= columns; ++c) {
    if (count[c] == 0) continue;
    const double v = sum[c] / count[c];
    points += fmt::format("{:.1f},{:.1f} ", kLeft + static_cast<double>(c),
                          p.top + kPanelHeight - std::min(v, p.y_max) / p.y_max * kPanelHeight);
  }
  if (!points.empty()) points.pop_back();
  return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\" points=\"{}\"/>\n",
                     color, points);
}

}  // namespace

std::string TimeSeriesCsv(const std::vector<Sample>& samples) {
  std::string out =
      "t_s,allocated_gpus,pending_jobs,pending_gpus,idle_gpus_while_waiting,down_gpus\n";
  const TimeMs t0 = samples.empty() ? 0 : samples.front().t_ms;
  for (const auto& s : samples) {
    out += fmt::format("{},{:.3f},{},{:.3f},{},{}\n", static_cast<double>(s.t_ms - t0) / 1000.0,
                       static_cast<double>(s.allocated_mgpu) / 1000.0, s.pending_jobs,
                       static_cast<double>(s.pending_mgpu) / 1000.0, s.idle_gpus_while_waiting,
                       s.down_gpus);
  }
  return out;
}

std::string JobsCsv(const std::vector<JobOutcome>& jobs) {
  std::string out =
      "id,tenant,gpus,submit_s,duration_s,first_start_s,end_s,evictions,waited,eta_given_s,eta_s,"
      "eta_predicted,eta_after_job,eta_after_s\n";
  auto sec = [](TimeMs ms) { return static_cast<double>(ms) / 1000.0; };
  for (const auto& o : jobs) {
    const bool eta = o.first_eta_given_ms != 0;
    out += fmt::format("{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{},{},{:.0f},{:.0f},{},{},{:.0f}\n",
                       o.id, o.tenant, o.gpus, sec(o.submit_ms), sec(o.duration_ms),
                       o.first_start_ms ? sec(*o.first_start_ms) : -1.0,
                       o.end_ms ? sec(*o.end_ms) : -1.0, o.evictions, o.waited ? 1 : 0,
                       eta ? sec(o.first_eta_given_ms) : -1.0, eta ? sec(o.first_eta_ms) : -1.0,
                       o.first_eta_predicted ? 1 : 0, o.first_eta_after_job,
                       o.first_eta_after_job != 0 ? sec(o.first_eta_after_ms) : -1.0);
  }
  return out;
}

std::string RenderSvg(const std::vector<PlotSeries>& series, std::int64_t cluster_gpus,
                      const std::string& title) {
  TimeMs t0 = 0;
  TimeMs t1 = 0;
  bool any = false;
  std::int64_t max_pending = 1;
  for (const auto& s : series) {
    for (const auto& x : *s.samples) {
      if (!any || x.t_ms < t0) t0 = x.t_ms;
      if (!any || x.t_ms > t1) t1 = x.t_ms;
      any = true;
      max_pending = std::max(max_pending, x.pending_jobs);
    }
  }
  const double x_max = std::max(static_cast<double>(t1 - t0) / 3.6e6, 1e-3);
  Panel alloc{kTop, "allocated GPUs", static_cast<double>(std::max<std::int64_t>(1, cluster_gpus))};
  alloc.y_max *= 1.05;
  Panel queue{kTop + kPanelHeight + kGap, "pending jobs", static_cast<double>(max_pending) * 1.05};
  const double height = queue.top + kPanelHeight + 70;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.1f}\" y=\"25\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n",
      kWidth, height, kWidth, height, kWidth / 2, HtmlEscape(title));
  out += Axes(alloc, x_max, false);
  out += Axes(queue, x_max, true);
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">time since first "
      "submit (hours)</text>\n",
      kLeft + (kWidth - kLeft - kRight) / 2, queue.top + kPanelHeight + 36);
  const double cap_y =
      alloc.top + kPanelHeight - static_cast<double>(cluster_gpus) / alloc.y_max * kPanelHeight;
  out += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" "
      "stroke-dasharray=\"4 3\"/>\n",
      kLeft, cap_y, kWidth - kRight, cap_y);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % kColors.size()];
    out += Line(*series[i].samples, t0, x_max, alloc, color,
                [](const Sample& s) { return static_cast<double>(s.allocated_mgpu) / 1000.0; });
    out += Line(*series[i].samples, t0, x_max, queue, color,
                [](const Sample& s) { return static_cast<double>(s.pending_jobs); });
  }
  // Legend, top right of the first panel.
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double y = alloc.top + 14 + 16 * static_cast<double>(i);
    const double x = kWidth - kRight - 130;
    out += fmt::format(
        "<g><line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"2\"/><text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text></g>\n",
        x, y - 4, x + 20, y - 4, kColors[i % kColors.size()], x + 25, y,
        HtmlEscape(series[i].name));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace berth::sim
