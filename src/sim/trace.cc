#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace berth::sim {
namespace {

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<std::int64_t> Integer(std::string_view text, std::size_t line, std::string_view column) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("line {}: {} '{}' is not an integer", line, column, text));
  }
  return v;
}

// FNV-1a: stable across platforms and runs, unlike std::hash.
std::uint64_t Fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

std::string TenantName(std::uint32_t i, std::uint32_t n) {
  if (n <= 1) return "default";
  return fmt::format("t{:02}", i);
}

Result<std::vector<SimJob>> ReadItp(std::istream& in, const ItpOptions& options) {
  if (options.gpus_per_node == 0) {
    return Fail(Code::kInvalidArgument, "gpus_per_node must be at least 1");
  }
  std::string line;
  if (!std::getline(in, line)) return Fail(Code::kInvalidArgument, "empty ITP trace");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != "job_id,submission_time,duration,num_gpu") {
    return Fail(Code::kInvalidArgument,
                fmt::format("line 1: expected the ITP header "
                            "'job_id,submission_time,duration,num_gpu', got '{}'",
                            line));
  }
  std::vector<SimJob> jobs;
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto cols = SplitCsv(line);
    if (cols.size() != 4) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: expected 4 columns, found {}", n, cols.size()));
    }
    auto submit = Integer(cols[1], n, "submission_time");
    if (!submit) return std::unexpected(submit.error());
    auto duration = Integer(cols[2], n, "duration");
    if (!duration) return std::unexpected(duration.error());
    auto gpus = Integer(cols[3], n, "num_gpu");
    if (!gpus) return std::unexpected(gpus.error());
    if (*submit < 0 || *duration <= 0 || *gpus < 0) {
      return Fail(
          Code::kInvalidArgument,
          fmt::format("line {}: submission_time and num_gpu must be >= 0 and duration > 0", n));
    }
    SimJob j;
    j.name = std::string(cols[0]);
    j.submit_ms = *submit * 1000;
    j.duration_ms = *duration * 1000;
    const auto per_node = static_cast<std::int64_t>(options.gpus_per_node);
    if (*gpus > per_node) {
      if (*gpus % per_node != 0) {
        return Fail(Code::kInvalidArgument,
                    fmt::format("line {}: {} GPUs is not a whole number of {}-GPU nodes", n, *gpus,
                                per_node));
      }
      j.replicas = static_cast<std::uint32_t>(*gpus / per_node);
      j.resources.gpus = options.gpus_per_node;
    } else {
      j.resources.gpus = static_cast<std::uint32_t>(*gpus);
    }
    const auto t = static_cast<std::uint32_t>(Fnv1a(j.name) % std::max(1U, options.tenants));
    j.tenant = TenantName(t, options.tenants);
    j.queue = options.tenants <= 1 ? "default" : "training";
    jobs.push_back(std::move(j));
    if (options.limit > 0 && jobs.size() >= options.limit) break;
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_ms < b.submit_ms; });
  for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<std::int64_t>(i) + 1;
  return jobs;
}

Result<std::vector<SimJob>> ReadItpFile(const std::filesystem::path& path,
                                        const ItpOptions& options) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kNotFound, fmt::format("cannot read {}", path.string()));
  auto jobs = ReadItp(in, options);
  if (!jobs) return Fail(jobs.error().code, path.string() + ": " + jobs.error().message);
  return jobs;
}

}  // namespace berth::sim
