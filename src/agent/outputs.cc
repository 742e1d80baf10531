#include "agent/outputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/utf8.h"
#include "model/outputs.h"

namespace berth::agent {
namespace {

// Closes a descriptor on every way out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

std::int64_t MtimeMs(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

std::string TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  return "other";
}

Result<OutputRead> List(int dir_fd, std::string_view shown) {
  OutputRead out;
  out.is_dir = true;
  int copy = ::dup(dir_fd);
  if (copy < 0) return Fail(Code::kInternal, fmt::format("dup: {}", std::strerror(errno)));
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return Fail(Code::kInternal, fmt::format("cannot list {}: {}", shown, std::strerror(errno)));
  }
  while (const dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (out.entries.size() == model::kMaxOutputEntries) {
      out.truncated = true;
      break;
    }
    OutputEntry entry;
    entry.name = std::string(name);
    struct stat st {};
    if (!ValidUtf8(name)) {
      // Shown with its odd bytes escaped (the reply is a protobuf string,
      // which must be UTF-8); no path can name it, so it is never read.
      entry.name = EscapeInvalidUtf8(name);
      entry.type = "other";
    } else if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      entry.type = TypeOf(st.st_mode);
      entry.size = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
      entry.modified_ms = MtimeMs(st);
    } else {
      entry.type = "other";  // gone since readdir
    }
    out.entries.push_back(std::move(entry));
  }
  ::closedir(dir);
  std::sort(out.entries.begin(), out.entries.end(),
            [](const OutputEntry& a, const OutputEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace

Result<OutputRead> ReadOutputAt(const std::filesystem::path& out_dir, std::string_view path,
                                std::uint64_t offset, std::uint32_t length) {
  auto parts = model::SplitOutputPath(path);
  if (!parts) return std::unexpected(parts.error());
  length = std::min(length, model::kMaxOutputChunk);
  Fd fd(::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Fail(Code::kNotFound, "the run left no output directory here");
    return Fail(Code::kInternal,
                fmt::format("cannot open {}: {}", out_dir.string(), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Fail(Code::kInternal,
                fmt::format("fstat {}: {}", out_dir.string(), std::strerror(errno)));
  }
  const uid_t owner = st.st_uid;
  std::string shown = ".";
  for (std::size_t i = 0; i < parts->size(); ++i) {
    const std::string& part = (*parts)[i];
    shown = i == 0 ? part : shown + "/" + part;
    // O_NOFOLLOW refuses a link as the last component and each step opens
    // one component, so no link anywhere is followed; O_NONBLOCK keeps a
    // fifo the job made from blocking the agent.
    Fd next(::openat(fd.get(), part.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (next.get() < 0) {
      const int err = errno;
      if (err == ENOENT) return Fail(Code::kNotFound, fmt::format("no {} in the outputs", shown));
      if (err == ELOOP) {
        return InvalidField("path", fmt::format("{} is a symbolic link; outputs are read without "
                                                "following links",
                                                shown));
      }
      if (err == ENXIO || err == EOPNOTSUPP) {
        return InvalidField("path", fmt::format("{} is not a file or directory", shown));
      }
      return Fail(Code::kInternal, fmt::format("cannot open {}: {}", shown, std::strerror(err)));
    }
    if (::fstat(next.get(), &st) != 0) {
      return Fail(Code::kInternal, fmt::format("fstat {}: {}", shown, std::strerror(errno)));
    }
    if (st.st_uid != owner) {
      return Fail(Code::kPermissionDenied,
                  fmt::format("{} is not the run's own (it belongs to uid {}, the run to uid {})",
                              shown, st.st_uid, owner));
    }
    const bool last = i + 1 == parts->size();
    if (!S_ISDIR(st.st_mode) && !(last && S_ISREG(st.st_mode))) {
      return InvalidField(
          "path", fmt::format("{} is not a {}", shown, last ? "file or directory" : "directory"));
    }
    fd = std::move(next);
  }
  if (S_ISDIR(st.st_mode)) return List(fd.get(), shown);
  OutputRead out;
  out.size = static_cast<std::uint64_t>(st.st_size);
  out.modified_ms = MtimeMs(st);
  if (offset < out.size && length > 0) {
    out.data.resize(std::min<std::uint64_t>(length, out.size - offset));
    std::size_t got = 0;
    while (got < out.data.size()) {
      ssize_t n = ::pread(fd.get(), out.data.data() + got, out.data.size() - got,
                          static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return Fail(Code::kInternal, fmt::format("read {}: {}", shown, std::strerror(errno)));
      if (n == 0) break;  // shrunk since fstat
      got += static_cast<std::size_t>(n);
    }
    out.data.resize(got);
  }
  return out;
}

}  // namespace berth::agent
