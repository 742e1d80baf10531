// `berth outputs` and `berth cp`: a job's outputs, listed and downloaded
// from the node of its run through berthd (docs/jobs.md#outputs).
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/table.h"

namespace berth::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string OutputsQuery(std::uint64_t id, const std::string& what, const OutputSource& src,
                         const std::string& path) {
  return fmt::format("/v1/jobs/{}/{}", id, what) +
         QueryString({{"replica", std::to_string(src.replica)},
                      {"attempt", src.attempt ? std::to_string(*src.attempt) : ""},
                      {"path", path}});
}

// A name a listing gave, safe to create below a local directory.
bool SafeName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string Joined(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// Downloads one file to `dest` through `dest`.part, so a download that
// stops half-way never looks complete. Returns the bytes written.
Result<std::uint64_t> FetchFile(ApiClient& api, std::uint64_t id, const OutputSource& src,
                                const std::string& path, const fs::path& dest) {
  const fs::path part = dest.string() + ".part";
  std::ofstream file(part, std::ios::binary | std::ios::trunc);
  if (!file) {
    return Fail(Code::kFailedPrecondition, fmt::format("cannot write {}", part.string()));
  }
  std::uint64_t got = 0;
  std::optional<std::uint64_t> length;
  auto st = api.Stream(
      OutputsQuery(id, "outputs/content", src, path),
      [&](std::string_view chunk) {
        file.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        got += chunk.size();
        return file.good();
      },
      true, &length);
  file.close();
  std::error_code ec;
  if (!st || !file.good() || (length && got != *length)) {
    fs::remove(part, ec);
    if (!st) return std::unexpected(st.error());
    if (length && got != *length) {
      return Fail(Code::kUnavailable,
                  fmt::format("the download of {} stopped after {} of {} bytes (the file "
                              "changed, or its node went away); nothing was kept",
                              path, got, *length));
    }
    return Fail(Code::kFailedPrecondition, fmt::format("cannot write {}", part.string()));
  }
  fs::rename(part, dest, ec);
  if (ec) {
    return Fail(Code::kFailedPrecondition, fmt::format("cannot rename {} to {}: {}", part.string(),
                                                       dest.string(), ec.message()));
  }
  return got;
}

struct CopyTotals {
  std::size_t files = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> skipped;
};

Status CopyTree(ApiClient& api, std::uint64_t id, const OutputSource& src, const std::string& path,
                const fs::path& dest, CopyTotals& totals, int depth) {
  if (depth > 64) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} is more than 64 directories deep; copy a part of it", path));
  }
  auto listing = api.Get(OutputsQuery(id, "outputs", src, path));
  if (!listing) return std::unexpected(listing.error());
  if (listing->value("type", "") != "dir") {
    auto n = FetchFile(api, id, src, path, dest);
    if (!n) return std::unexpected(n.error());
    ++totals.files;
    totals.bytes += *n;
    return Ok();
  }
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("cannot create {}: {}", dest.string(), ec.message()));
  }
  if (Bool(*listing, "truncated")) {
    totals.skipped.push_back(fmt::format("{}: more entries than one listing holds; the rest",
                                         path.empty() ? "." : path));
  }
  for (const auto& e : listing->value("entries", json::array())) {
    const std::string name = e.value("name", "");
    const std::string type = e.value("type", "");
    if (!SafeName(name)) {
      totals.skipped.push_back(
          fmt::format("{}: a name that cannot be a local file", Joined(path, name)));
      continue;
    }
    if (type != "file" && type != "dir") {
      totals.skipped.push_back(fmt::format("{}: not a file or directory", Joined(path, name)));
      continue;
    }
    BERTH_RETURN_IF_ERROR(
        CopyTree(api, id, src, Joined(path, name), dest / name, totals, depth + 1));
  }
  return Ok();
}

std::string RenderListing(const json& r, TimeMs now) {
  std::string out =
      fmt::format("job {} replica {} attempt {} (run {} on {}): {}\n", r.value("job", 0),
                  r.value("replica", 0), r.value("attempt", 0), r.value("run", ""),
                  r.value("node", ""), r.value("path", "").empty() ? "." : r.value("path", ""));
  if (r.value("type", "") != "dir") {
    out += fmt::format("file, {} ({} bytes), modified {} ago\n",
                       FormatMemory(r.value("size", std::uint64_t{0})), r.value("size", 0),
                       FormatAge(now - r.value("modified_ms", std::int64_t{0})));
    return out;
  }
  Table table({"NAME", "TYPE", "SIZE", "MODIFIED"});
  for (const auto& e : r.value("entries", json::array())) {
    const bool file = e.value("type", "") == "file";
    table.AddRow({e.value("name", ""), e.value("type", ""),
                  file ? FormatMemory(e.value("size", std::uint64_t{0})) : "-",
                  FormatAge(now - e.value("modified_ms", std::int64_t{0})) + " ago"});
  }
  if (table.empty()) return out + "(empty)\n";
  out += table.Render();
  if (Bool(r, "truncated")) out += "(more entries than one listing holds)\n";
  return out;
}

}  // namespace

Result<CopySpec> ParseCopySource(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view id_text = text.substr(0, colon);
  std::uint64_t id = 0;
  auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (colon == std::string_view::npos || ec != std::errc() ||
      p != id_text.data() + id_text.size() || id == 0) {
    return InvalidField("source", fmt::format("'{}' is not JOB:PATH; write for example "
                                              "12:model.pt, or 12: for the whole output directory",
                                              text));
  }
  return CopySpec{id, std::string(text.substr(colon + 1))};
}

Status ListOutputs(ApiClient& api, std::uint64_t id, const OutputSource& src,
                   const std::string& path, const Output& output) {
  auto r = api.Get(OutputsQuery(id, "outputs", src, path));
  if (!r) return std::unexpected(r.error());
  if (output.format == OutputFormat::kJson) {
    output.out << r->dump(2) << "\n";
  } else {
    output.out << RenderListing(*r, output.clock.NowMs());
  }
  return Ok();
}

Status CopyOutputs(ApiClient& api, const CopySpec& source, const OutputSource& src,
                   const std::string& dest, bool recursive, const Output& output) {
  fs::path target = dest.empty() ? fs::path(".") : fs::path(dest);
  std::string base = source.path;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string leaf =
      base.substr(base.find_last_of('/') == std::string::npos ? 0 : base.find_last_of('/') + 1);
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    target /= leaf.empty() ? fmt::format("job-{}-outputs", source.job) : leaf;
  }
  CopyTotals totals;
  if (recursive) {
    BERTH_RETURN_IF_ERROR(CopyTree(api, source.job, src, source.path, target, totals, 0));
  } else {
    auto n = FetchFile(api, source.job, src, source.path, target);
    if (!n) return std::unexpected(n.error());
    totals.files = 1;
    totals.bytes = *n;
  }
  if (output.format == OutputFormat::kJson) {
    output.out << json{{"files", totals.files},
                       {"bytes", totals.bytes},
                       {"to", target.string()},
                       {"skipped", totals.skipped}}
                      .dump(2)
               << "\n";
    return Ok();
  }
  output.out << fmt::format("copied {} file{} ({}) to {}\n", totals.files,
                            totals.files == 1 ? "" : "s", FormatMemory(totals.bytes),
                            target.string());
  for (const auto& s : totals.skipped) output.out << "skipped " << s << "\n";
  return Ok();
}

}  // namespace berth::cli
