#include "model/prometheus_text.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

namespace berth::model {
namespace {

bool NameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

bool NameChar(char c) {
  return NameStart(c) || (c >= '0' && c <= '9');
}

// Skips a label set "{a="x",b="y\"z"}" from `pos` (at '{'); npos when it
// does not close on the line.
std::size_t SkipLabels(std::string_view line, std::size_t pos) {
  bool quoted = false;
  for (std::size_t i = pos + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '\\') {
        ++i;  // an escaped character, whatever it is
      } else if (c == '"') {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == '}') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The sample value: a float as Prometheus writes it ("3", "2.5e3", "+Inf",
// "NaN" are its forms; only finite values are accepted).
std::optional<double> Value(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  const std::size_t end = text.find_first_of(" \t");
  std::string_view v = text.substr(0, end);
  if (v.empty()) return std::nullopt;
  if (v.front() == '+') v.remove_prefix(1);
  double out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc{} || ptr != v.data() + v.size() || !std::isfinite(out)) return std::nullopt;
  return out;
}

}  // namespace

bool IsPrometheusMetricName(std::string_view name) {
  if (name.empty() || !NameStart(name.front())) return false;
  for (char c : name) {
    if (!NameChar(c)) return false;
  }
  return true;
}

Result<std::optional<double>> SumPrometheusMetric(std::string_view text, std::string_view name) {
  if (!IsPrometheusMetricName(name)) {
    return Fail(Code::kInvalidArgument, fmt::format("'{}' is not a Prometheus metric name", name),
                "metric");
  }
  if (text.size() > kMaxMetricsBytes) {
    return Fail(Code::kResourceExhausted,
                fmt::format("the metrics text is {} bytes, over the {} read", text.size(),
                            kMaxMetricsBytes),
                "metrics");
  }
  std::optional<double> sum;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.starts_with(name)) continue;  // comments, blank lines, other metrics
    std::size_t pos = name.size();
    if (pos < line.size() && NameChar(line[pos])) continue;  // a longer name
    if (pos < line.size() && line[pos] == '{') {
      pos = SkipLabels(line, pos);
      if (pos == std::string_view::npos) {
        return Fail(Code::kInvalidArgument,
                    fmt::format("line {}: the labels of {} do not close", line_no, name),
                    "metrics");
      }
    }
    auto v = pos < line.size() && (line[pos] == ' ' || line[pos] == '\t') ? Value(line.substr(pos))
                                                                          : std::nullopt;
    if (!v) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: the sample of {} is not a finite number", line_no, name),
                  "metrics");
    }
    sum = sum.value_or(0.0) + *v;
    if (!std::isfinite(*sum)) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("the samples of {} add up past a finite "
                              "number",
                              name),
                  "metrics");
    }
  }
  return sum;
}

}  // namespace berth::model
