#include "model/outputs.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/utf8.h"

namespace berth::model {

Result<std::vector<std::string>> SplitOutputPath(std::string_view path, std::string_view field) {
  if (path.size() > kMaxOutputPath) {
    return InvalidField(std::string(field), fmt::format("the path is {} bytes long; at most {}",
                                                        path.size(), kMaxOutputPath));
  }
  if (path.find('\0') != std::string_view::npos) {
    return InvalidField(std::string(field), "the path holds a NUL byte");
  }
  // The path travels to the node in a protobuf string, which must be UTF-8;
  // a file whose name is not is listed as "other" and never read.
  if (!ValidUtf8(path)) {
    return InvalidField(std::string(field),
                        fmt::format("'{}' is not valid UTF-8; outputs are named in UTF-8",
                                    EscapeInvalidUtf8(path)));
  }
  if (path.starts_with('/')) {
    std::string_view rest = path.substr(std::min(path.find_first_not_of('/'), path.size()));
    return InvalidField(std::string(field),
                        fmt::format("'{}' is absolute; a path into a job's outputs is relative to "
                                    "its output directory (BERTH_OUTPUT_DIR): write '{}'",
                                    path, rest.empty() ? "." : rest));
  }
  std::vector<std::string> parts;
  if (path == ".") return parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part == "." || part == "..") {
      return InvalidField(std::string(field),
                          fmt::format("'{}' holds '{}'; name the file below the output directory "
                                      "without '.' or '..'",
                                      path, part));
    }
    if (!part.empty()) parts.emplace_back(part);
    start = end + 1;
  }
  return parts;
}

}  // namespace berth::model
