// The web console's files (console/, built by npm) as berthd serves them at
// /ui/: read from one directory, never from outside it, with the headers
// that keep the page to its own origin (docs/console.md). The files hold no
// data, so they need no sign-in; every datum the page shows comes from the
// API with the console's cookie, authorized as `berth` would be.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "http/message.h"

namespace berth::http {

// The Content-Type for a file name, by its extension (case-insensitive);
// application/octet-stream for one the console never ships.
std::string_view ContentTypeFor(std::string_view file_name);

// The file `relative` (a decoded URL path below the mount, "/"-separated)
// names inside `root`: NotFound for a name with a "." or ".." segment, a
// NUL byte or a backslash, and for a file whose real path (symbolic links
// followed) lies outside root's real path. Empty segments ("a//b", a
// leading "/") are skipped, so an absolute path stays under root. The file
// need not exist.
Result<std::filesystem::path> ResolveUnder(const std::filesystem::path& root,
                                           std::string_view relative);

// The headers every answer under the mount carries, files and refusals
// alike: a Content-Security-Policy with no inline script and no framing,
// nosniff, and no Referer to other sites.
void SetConsoleSecurityHeaders(Response& res);

class StaticSite {
 public:
  // `mount` is the URL prefix with its trailing slash ("/ui/"); `root` is
  // where the built files are, which may not exist (then every answer is a
  // 404 saying how to build them).
  StaticSite(std::string mount, std::filesystem::path root);

  // Answers GET or HEAD for a path under the mount: the file; index.html
  // for a path that names no file and whose last segment has no extension
  // (the console's own routes, such as /ui/jobs/12); 404 otherwise. The
  // server drops the body of a HEAD answer and keeps its Content-Length.
  void Serve(const Request& req, Response& res) const;

  // Whether the built console is there (index.html under root).
  bool available() const;
  const std::filesystem::path& root() const { return root_; }

  // Larger files are refused (the built console is about 60 KB).
  static constexpr std::size_t kMaxFileBytes = std::size_t{8} * 1024 * 1024;

 private:
  std::string mount_;
  std::filesystem::path root_;
};

}  // namespace berth::http
