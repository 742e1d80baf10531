#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
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

Status Header(std::istream& in, std::string_view want, std::string_view what) {
  std::string line;
  if (!std::getline(in, line)) return Fail(Code::kInvalidArgument, fmt::format("empty {}", what));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != want) {
    return Fail(Code::kInvalidArgument,
                fmt::format("line 1: expected the {} header '{}', got '{}'", what, want, line));
  }
  return Ok();
}

// Calls `row(line_number, columns)` for each non-empty line after the header,
// until the end, an error, or `row` returns false (enough rows).
template <typename Row>
Status ForEachRow(std::istream& in, std::size_t columns, Row&& row) {
  std::string line;
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto cols = SplitCsv(line);
    if (cols.size() != columns) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: expected {} columns, found {}", n, columns, cols.size()));
    }
    Result<bool> more = row(n, cols);
    if (!more) return std::unexpected(more.error());
    if (!*more) break;
  }
  return Ok();
}

// Opens `path` and reads it with `read`; errors name the file.
template <typename Read>
auto FromFile(const std::filesystem::path& path, Read&& read)
    -> decltype(read(std::declval<std::istream&>())) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kNotFound, fmt::format("cannot read {}", path.string()));
  auto out = read(in);
  if (!out) return Fail(out.error().code, path.string() + ": " + out.error().message);
  return out;
}

void NumberInSubmitOrder(std::vector<SimJob>& jobs) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const SimJob& a, const SimJob& b) { return a.submit_ms < b.submit_ms; });
  for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<std::int64_t>(i) + 1;
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
  BERTH_RETURN_IF_ERROR(Header(in, "job_id,submission_time,duration,num_gpu", "ITP"));
  std::vector<SimJob> jobs;
  auto row = [&](std::size_t n, const std::vector<std::string_view>& cols) -> Result<bool> {
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
    return options.limit == 0 || jobs.size() < options.limit;
  };
  BERTH_RETURN_IF_ERROR(ForEachRow(in, 4, row));
  NumberInSubmitOrder(jobs);
  return jobs;
}

namespace {

std::uint64_t OpenbGpuMemory(std::string_view model) {
  if (model == "T4" || model == "P100" || model == "V100M16") return 16ULL << 30;
  if (model == "A10") return 24ULL << 30;
  return 32ULL << 30;  // V100M32 and the undisclosed G1, G2, G3
}

model::Priority OpenbPriority(std::string_view qos) {
  if (qos == "LS" || qos == "Guaranteed") return model::Priority::kHigh;
  if (qos == "BE") return model::Priority::kLow;
  return model::Priority::kNormal;
}

}  // namespace

Result<std::vector<SimJob>> ReadOpenbPods(std::istream& in, const OpenbOptions& options) {
  constexpr std::string_view kHeader =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time";
  BERTH_RETURN_IF_ERROR(Header(in, kHeader, "OpenB pod list"));
  std::vector<SimJob> jobs;
  auto row = [&](std::size_t n, const std::vector<std::string_view>& cols) -> Result<bool> {
    std::array<std::int64_t, 6> v{};
    constexpr std::array<std::pair<std::size_t, std::string_view>, 6> kInts{{{1, "cpu_milli"},
                                                                             {2, "memory_mib"},
                                                                             {3, "num_gpu"},
                                                                             {4, "gpu_milli"},
                                                                             {8, "creation_time"},
                                                                             {9, "deletion_time"}}};
    for (std::size_t k = 0; k < kInts.size(); ++k) {
      auto x = Integer(cols[kInts[k].first], n, kInts[k].second);
      if (!x) return std::unexpected(x.error());
      if (*x < 0) {
        return Fail(Code::kInvalidArgument,
                    fmt::format("line {}: {} must be >= 0", n, kInts[k].second));
      }
      v[k] = *x;
    }
    const auto [cpu, mem, num_gpu, gpu_milli, created, deleted] = v;
    if (num_gpu > 8 || gpu_milli > 1000 || (gpu_milli < 1000 && num_gpu > 1)) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: num_gpu {} with gpu_milli {} is not a pod shape Berth "
                              "knows (0-8 whole GPUs, or a share of one)",
                              n, num_gpu, gpu_milli));
    }
    SimJob j;
    j.name = std::string(cols[0]);
    j.submit_ms = created * 1000;
    j.duration_ms = std::max<std::int64_t>(1, deleted - created) * 1000;
    j.resources.cpu_millis = static_cast<std::uint32_t>(cpu);
    j.resources.memory_bytes = static_cast<std::uint64_t>(mem) << 20;
    if (num_gpu == 1 && gpu_milli > 0 && gpu_milli < 1000) {
      j.resources.gpu_share_millis = static_cast<std::uint32_t>(gpu_milli);
    } else {
      j.resources.gpus = static_cast<std::uint32_t>(num_gpu);
    }
    if (num_gpu > 0 && !cols[5].empty() && cols[5].find('|') == std::string_view::npos) {
      j.resources.gpu_model = std::string(cols[5]);
    }
    j.priority = OpenbPriority(cols[6]);
    const auto t = static_cast<std::uint32_t>(Fnv1a(j.name) % std::max(1U, options.tenants));
    j.tenant = TenantName(t, options.tenants);
    j.queue = options.tenants <= 1 ? "default" : "training";
    jobs.push_back(std::move(j));
    return options.limit == 0 || jobs.size() < options.limit;
  };
  BERTH_RETURN_IF_ERROR(ForEachRow(in, 11, row));
  NumberInSubmitOrder(jobs);
  return jobs;
}

Result<std::vector<sched::NodeView>> ReadOpenbNodes(std::istream& in) {
  BERTH_RETURN_IF_ERROR(Header(in, "sn,cpu_milli,memory_mib,gpu,model", "OpenB node list"));
  std::vector<sched::NodeView> nodes;
  auto row = [&](std::size_t n, const std::vector<std::string_view>& cols) -> Result<bool> {
    auto cpu = Integer(cols[1], n, "cpu_milli");
    if (!cpu) return std::unexpected(cpu.error());
    auto mem = Integer(cols[2], n, "memory_mib");
    if (!mem) return std::unexpected(mem.error());
    auto gpus = Integer(cols[3], n, "gpu");
    if (!gpus) return std::unexpected(gpus.error());
    if (*cpu < 0 || *mem < 0 || *gpus < 0 || *gpus > 64) {
      return Fail(Code::kInvalidArgument, fmt::format("line {}: a negative or huge amount", n));
    }
    sched::NodeView v;
    v.name = std::string(cols[0]);
    v.ready = true;
    v.cpu_millis_free = static_cast<std::uint64_t>(*cpu);
    v.memory_bytes_free = static_cast<std::uint64_t>(*mem) << 20;
    for (std::int64_t g = 0; g < *gpus; ++g) {
      sched::GpuView gv;
      gv.index = static_cast<std::uint32_t>(g);
      gv.uuid = fmt::format("{}-gpu{}", v.name, g);
      gv.model = std::string(cols[4]);
      gv.memory_bytes = OpenbGpuMemory(cols[4]);
      gv.sharing = true;
      v.gpus.push_back(std::move(gv));
    }
    nodes.push_back(std::move(v));
    return true;
  };
  BERTH_RETURN_IF_ERROR(ForEachRow(in, 5, row));
  return nodes;
}

Result<std::vector<SimJob>> ReadOpenbPodsFile(const std::filesystem::path& path,
                                              const OpenbOptions& options) {
  return FromFile(path, [&](std::istream& in) { return ReadOpenbPods(in, options); });
}

Result<std::vector<sched::NodeView>> ReadOpenbNodesFile(const std::filesystem::path& path) {
  return FromFile(path, [](std::istream& in) { return ReadOpenbNodes(in); });
}

namespace {

// A time in seconds, possibly fractional ("1000594.0000000001"); empty or
// NaN is absent.
Result<std::optional<TimeMs>> Seconds(std::string_view text, std::size_t line,
                                      std::string_view column) {
  if (text.empty() || text == "NaN" || text == "nan") return std::optional<TimeMs>{};
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return Fail(Code::kInvalidArgument,
                fmt::format("line {}: {} '{}' is not a time in seconds", line, column, text));
  }
  return std::optional<TimeMs>{static_cast<TimeMs>(std::llround(v * 1000))};
}

Result<double> Number(std::string_view text, std::size_t line, std::string_view column) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return Fail(Code::kInvalidArgument,
                fmt::format("line {}: {} '{}' is not a number >= 0", line, column, text));
  }
  return v;
}

}  // namespace

Result<std::vector<SimJob>> ReadDlrm(std::istream& in, const DlrmOptions& options) {
  constexpr std::string_view kHeader =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
      "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
      "creation_time,scheduled_time,deletion_time";
  BERTH_RETURN_IF_ERROR(Header(in, kHeader, "DLRM trace"));
  std::vector<SimJob> jobs;
  std::vector<bool> open_ended;  // no deletion time: runs to the window's end
  TimeMs window_end = 0;
  auto row = [&](std::size_t n, const std::vector<std::string_view>& cols) -> Result<bool> {
    if (cols[1] != "CN" && cols[1] != "HN") {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: role '{}' is neither CN nor HN", n, cols[1]));
    }
    auto cpu = Number(cols[3], n, "cpu_request");
    if (!cpu) return std::unexpected(cpu.error());
    auto gpus = Integer(cols[5], n, "gpu_request");
    if (!gpus) return std::unexpected(gpus.error());
    auto mem = Number(cols[9], n, "memory_request");
    if (!mem) return std::unexpected(mem.error());
    auto created = Seconds(cols[14], n, "creation_time");
    if (!created) return std::unexpected(created.error());
    auto deleted = Seconds(cols[16], n, "deletion_time");
    if (!deleted) return std::unexpected(deleted.error());
    if (*gpus < 0 || *gpus > 8) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: gpu_request {} is not 0-8", n, *gpus));
    }
    if (*created && *deleted && **deleted < **created) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: deletion_time is before creation_time", n));
    }
    SimJob j;
    j.name = std::string(cols[0]);
    j.submit_ms = created->value_or(0);
    j.duration_ms = deleted->value_or(0);  // fixed below once the window is known
    j.resources.gpus = static_cast<std::uint32_t>(*gpus);
    j.resources.cpu_millis = static_cast<std::uint32_t>(std::llround(*cpu * 1000));
    j.resources.memory_bytes = static_cast<std::uint64_t>(std::llround(*mem * 1024)) << 20;
    const auto t = static_cast<std::uint32_t>(Fnv1a(cols[2]) % std::max(1U, options.tenants));
    j.tenant = TenantName(t, options.tenants);
    j.queue = options.tenants <= 1 ? "default" : "serving";
    window_end = std::max({window_end, created->value_or(0), deleted->value_or(0)});
    open_ended.push_back(!deleted->has_value());
    jobs.push_back(std::move(j));
    return options.limit == 0 || jobs.size() < options.limit;
  };
  BERTH_RETURN_IF_ERROR(ForEachRow(in, 17, row));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const TimeMs end = open_ended[i] ? window_end : jobs[i].duration_ms;
    jobs[i].duration_ms = std::max<TimeMs>(1000, end - jobs[i].submit_ms);
  }
  NumberInSubmitOrder(jobs);
  return jobs;
}

Result<std::vector<SimJob>> ReadDlrmFile(const std::filesystem::path& path,
                                         const DlrmOptions& options) {
  return FromFile(path, [&](std::istream& in) { return ReadDlrm(in, options); });
}

std::vector<sched::NodeView> DlrmNodes(std::size_t gpu_nodes, std::size_t cpu_nodes) {
  std::vector<sched::NodeView> out;
  for (std::size_t n = 0; n < gpu_nodes + cpu_nodes; ++n) {
    const bool gpu = n < gpu_nodes;
    sched::NodeView v;
    v.name = gpu ? fmt::format("hn-{:04}", n) : fmt::format("cn-{:04}", n - gpu_nodes);
    v.ready = true;
    v.cpu_millis_free = gpu ? 128'000 : 192'000;
    v.memory_bytes_free = 1ULL << 40;
    for (std::uint32_t g = 0; gpu && g < 8; ++g) {
      sched::GpuView gv;
      gv.index = g;
      gv.uuid = fmt::format("{}-gpu{}", v.name, g);
      gv.model = "DLRM-GPU";
      gv.memory_bytes = 32ULL << 30;
      v.gpus.push_back(std::move(gv));
    }
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<NodeFailure>> ReadNodeFailures(std::istream& in) {
  BERTH_RETURN_IF_ERROR(Header(in, "time_s,node,down_s", "node failures"));
  std::vector<NodeFailure> rows;
  auto row = [&](std::size_t n, const std::vector<std::string_view>& cols) -> Result<bool> {
    auto at = Integer(cols[0], n, "time_s");
    if (!at) return std::unexpected(at.error());
    auto down = Integer(cols[2], n, "down_s");
    if (!down) return std::unexpected(down.error());
    if (*at < 0 || *down <= 0 || cols[1].empty()) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("line {}: time_s must be >= 0, node named and down_s > 0", n));
    }
    rows.push_back({*at * 1000, std::string(cols[1]), *down * 1000});
    return true;
  };
  BERTH_RETURN_IF_ERROR(ForEachRow(in, 3, row));
  return rows;
}

Result<std::vector<NodeFailure>> ReadNodeFailuresFile(const std::filesystem::path& path) {
  return FromFile(path, [](std::istream& in) { return ReadNodeFailures(in); });
}

Result<std::vector<SimJob>> ReadItpFile(const std::filesystem::path& path,
                                        const ItpOptions& options) {
  return FromFile(path, [&](std::istream& in) { return ReadItp(in, options); });
}

}  // namespace berth::sim
