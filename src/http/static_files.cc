#include "http/static_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <utility>

namespace berth::http {
namespace fs = std::filesystem;

namespace {

// What the console's build writes (Vite: html, js, css, svg, json, fonts
// if it ever ships any) and little else.
constexpr std::array<std::pair<std::string_view, std::string_view>, 14> kTypes{{
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".webp", "image/webp"},
    {".woff2", "font/woff2"},
    {".woff", "font/woff"},
    {".txt", "text/plain; charset=utf-8"},
    {".webmanifest", "application/manifest+json"},
}};

// The policy for every page under the mount: scripts, styles, images and
// API calls from berthd's own origin only, no inline script or style, no
// plugins, no <base> rewriting, forms post only here, and no other site
// may frame the console (clickjacking a Cancel button).
constexpr std::string_view kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

void Refuse(Response& res, int status, std::string message) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(std::move(message) + "\n", "text/plain; charset=utf-8");
}

}  // namespace

std::string_view ContentTypeFor(std::string_view file_name) {
  auto dot = file_name.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string ext(file_name.substr(dot));
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& [e, type] : kTypes) {
    if (e == ext) return type;
  }
  return "application/octet-stream";
}

Result<fs::path> ResolveUnder(const fs::path& root, std::string_view relative) {
  if (relative.find('\0') != std::string_view::npos ||
      relative.find('\\') != std::string_view::npos) {
    return Fail(Code::kNotFound, "not a console file name");
  }
  fs::path out = root;
  std::size_t start = 0;
  while (start <= relative.size()) {
    auto end = relative.find('/', start);
    if (end == std::string_view::npos) end = relative.size();
    std::string_view seg = relative.substr(start, end - start);
    if (seg == "." || seg == "..") return Fail(Code::kNotFound, "not a console file name");
    // Segment by segment, so no segment is ever taken as an absolute path.
    if (!seg.empty()) out /= fs::path(std::string(seg));
    start = end + 1;
  }
  // Symbolic links are followed and the result must still be under root:
  // a link in the build directory to /etc stays unreadable.
  std::error_code ec;
  const fs::path real_root = fs::weakly_canonical(root, ec);
  if (ec) return Fail(Code::kNotFound, "the console directory cannot be read");
  const fs::path real = fs::weakly_canonical(out, ec);
  if (ec) return Fail(Code::kNotFound, "not a console file name");
  auto [r, p] = std::mismatch(real_root.begin(), real_root.end(), real.begin(), real.end());
  if (r != real_root.end()) return Fail(Code::kNotFound, "outside the console directory");
  return real;
}

void SetConsoleSecurityHeaders(Response& res) {
  res.set_header("Content-Security-Policy", kCsp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
}

StaticSite::StaticSite(std::string mount, fs::path root)
    : mount_(std::move(mount)), root_(std::move(root)) {}

bool StaticSite::available() const {
  std::error_code ec;
  return fs::is_regular_file(root_ / "index.html", ec);
}

void StaticSite::Serve(const Request& req, Response& res) const {
  SetConsoleSecurityHeaders(res);
  if (!available()) {
    return Refuse(res, 404,
                  fmt::format("the web console is not built: {}index.html is missing. Build it "
                              "with `npm ci && npm run build` in console/ (scripts/start.sh "
                              "does), or start berthd with --ui-dir pointing at the built "
                              "files (console/dist)",
                              root_.string().empty() ? "" : root_.string() + "/"));
  }
  std::string_view rel(req.path);
  if (rel.starts_with(mount_)) {
    rel.remove_prefix(mount_.size());
  } else {
    rel = {};
  }
  auto file = ResolveUnder(root_, rel);
  if (!file) return Refuse(res, 404, "not found: " + file.error().message);
  std::error_code ec;
  fs::path chosen = *file;
  bool is_index = false;
  if (!fs::is_regular_file(chosen, ec)) {
    const auto last = rel.substr(rel.rfind('/') == std::string_view::npos ? 0 : rel.rfind('/') + 1);
    // A missing script or stylesheet is a 404, never the page in its place
    // (which the browser would refuse as the wrong type, less clearly): a
    // name under assets/ or of a type the build writes. Any other name is
    // a route of the console's, dots and all (/ui/fleet/h1.example.com).
    if (rel.starts_with("assets/") || ContentTypeFor(last) != "application/octet-stream") {
      return Refuse(res, 404, "not found");
    }
    chosen = fs::weakly_canonical(root_ / "index.html", ec);
    is_index = true;
  } else {
    is_index = chosen.filename() == "index.html";
  }
  const auto size = fs::file_size(chosen, ec);
  if (ec) return Refuse(res, 404, "not found");
  if (size > kMaxFileBytes) return Refuse(res, 500, "console file too large to serve");
  // Read whole, by the size just checked (a file that shrank meanwhile reads
  // short and is refused rather than served cut).
  std::ifstream in(chosen, std::ios::binary);
  std::string body(static_cast<std::size_t>(size), '\0');
  in.read(body.data(), static_cast<std::streamsize>(body.size()));
  if (!in || static_cast<std::size_t>(in.gcount()) != body.size()) {
    return Refuse(res, 500, "console file unreadable");
  }
  // Vite names built assets by their content hash, so they never change;
  // the page itself is asked again each time so a new build shows at once.
  const bool hashed = rel.starts_with("assets/") && !is_index;
  res.set_header("Cache-Control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
  res.status = 200;
  res.set_content(std::move(body), ContentTypeFor(chosen.filename().string()));
}

}  // namespace berth::http
