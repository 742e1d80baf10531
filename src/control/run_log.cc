#include "control/run_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/units.h"

namespace berth::server {
namespace {

namespace fs = std::filesystem;

struct Index {
  std::uint64_t gen = 0;
  std::uint64_t head = 0;     // absolute [0, head) is kept
  std::uint64_t dropped = 0;  // then absolute [head, head + dropped) is not
};

fs::path IndexPath(const fs::path& path) {
  return fs::path(path.string() + ".index");
}

fs::path DataPath(const fs::path& path, std::uint64_t gen) {
  return gen == 0 ? path : fs::path(fmt::format("{}.{}", path.string(), gen));
}

std::optional<std::string> ReadSmall(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// A missing index is a log that was never trimmed; an unreadable one is
// treated the same way rather than failing every read and write.
Index ReadIndex(const fs::path& path) {
  Index idx;
  auto text = ReadSmall(IndexPath(path));
  if (!text) return idx;
  try {
    auto j = nlohmann::json::parse(*text);
    idx.gen = j.at("gen").get<std::uint64_t>();
    idx.head = j.at("head").get<std::uint64_t>();
    idx.dropped = j.at("dropped").get<std::uint64_t>();
  } catch (const nlohmann::json::exception&) {
    return Index{};
  }
  return idx;
}

int SyncDir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

bool WriteAll(int fd, std::string_view data, off_t at) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
    at += n;
  }
  return true;
}

// Index written whole and durably: write-tmp, fsync, rename, fsync-dir.
Status WriteIndex(const fs::path& path, const Index& idx) {
  fs::path target = IndexPath(path);
  fs::path tmp = fs::path(target.string() + ".tmp");
  std::string text =
      nlohmann::json{{"gen", idx.gen}, {"head", idx.head}, {"dropped", idx.dropped}}.dump();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  bool ok = fd >= 0 && WriteAll(fd, text, 0) && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(tmp.c_str(), target.c_str()) == 0 && SyncDir(target.parent_path()) == 0;
  if (!ok) return Fail(Code::kInternal, fmt::format("cannot write {}", target.string()));
  return Ok();
}

// Copies [from, from + len) of `in` to the end of `out` (at `at`).
bool CopyRange(int in, int out, std::uint64_t from, std::uint64_t len, std::uint64_t at) {
  std::string buf(1 << 20, '\0');
  while (len > 0) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(len, buf.size()));
    ssize_t n = ::pread(in, buf.data(), want, static_cast<off_t>(from));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto got = static_cast<std::size_t>(n);
    if (!WriteAll(out, std::string_view(buf.data(), got), static_cast<off_t>(at))) return false;
    from += got;
    at += got;
    len -= got;
  }
  return true;
}

// The kept bytes as readers see them: head [0, head) and the tail from
// tail_from (absolute), with the marker between.
struct View {
  Index idx;
  std::uint64_t received = 0;
  std::uint64_t head = 0;       // kept head (absolute end)
  std::uint64_t tail_from = 0;  // first absolute byte of the kept tail
};

// Readers see at most `limit` bytes (plus the marker) even while the file is
// in its slack, before the next trim.
View ViewOf(const Index& idx, std::uint64_t file_size, std::uint64_t limit) {
  View v;
  v.idx = idx;
  v.received = file_size + idx.dropped;
  const bool trimmed = idx.gen > 0;
  const bool over = limit > 0 && v.received > limit;
  // Untrimmed: the head a trim would keep, once the log is past the limit.
  v.head = trimmed ? idx.head : over ? limit / 4 : v.received;
  v.tail_from = trimmed ? idx.head + idx.dropped : v.head;
  if (over && limit > v.head) {
    v.tail_from = std::max(v.tail_from, v.received - (limit - v.head));
  }
  return v;
}

std::uint64_t FileSize(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

// The file offset of absolute byte `abs` (which must be kept).
std::uint64_t FileOffset(const Index& idx, std::uint64_t abs) {
  return abs < idx.head ? abs : abs - idx.dropped;
}

std::string Marker(std::uint64_t dropped, std::uint64_t limit, bool at_line_start) {
  return fmt::format(
      "{}[berth: {} bytes of output dropped here: this run's log passed its limit of {}, so "
      "Berth keeps its head and its latest output]\n",
      at_line_start ? "" : "\n", dropped, FormatBytes(limit));
}

// Opens the current generation's file for reading, retrying when a trim
// replaced it between reading the index and opening the file.
int OpenCurrent(const fs::path& path, Index& idx) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    idx = ReadIndex(path);
    int fd = ::open(DataPath(path, idx.gen).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != ENOENT) return -1;
  }
  return -1;
}

Status Trim(const fs::path& path, const Index& idx, int fd, std::uint64_t limit) {
  const std::uint64_t size = FileSize(fd);
  const std::uint64_t received = size + idx.dropped;
  const std::uint64_t head = idx.gen > 0 ? idx.head : limit / 4;
  if (limit <= head || received <= limit) return Ok();
  const std::uint64_t tail_from = received - (limit - head);
  if (tail_from <= head + idx.dropped) return Ok();

  Index next{idx.gen + 1, head, tail_from - head};
  fs::path out_path = DataPath(path, next.gen);
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (out < 0) return Fail(Code::kInternal, fmt::format("cannot create {}", out_path.string()));
  bool ok = CopyRange(fd, out, 0, head, 0) &&
            CopyRange(fd, out, FileOffset(idx, tail_from), received - tail_from, head) &&
            ::fsync(out) == 0;
  ::close(out);
  if (!ok) {
    ::unlink(out_path.c_str());
    return Fail(Code::kInternal, fmt::format("cannot trim log into {}", out_path.string()));
  }
  BERTH_RETURN_IF_ERROR(WriteIndex(path, next));
  // Committed: the old generation is garbage (and so is any older one a
  // crash left behind).
  ::unlink(DataPath(path, idx.gen).c_str());
  if (idx.gen > 0) ::unlink(DataPath(path, idx.gen - 1).c_str());
  return Ok();
}

}  // namespace

Status WriteRunLog(const fs::path& path, std::uint64_t offset, std::string_view data,
                   std::uint64_t limit) {
  const Index idx = ReadIndex(path);
  fs::path file = DataPath(path, idx.gen);
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return Fail(Code::kInternal, fmt::format("cannot open log {}", file.string()));
  // Absolute [offset, end) in up to two kept pieces; what falls in the
  // dropped middle was received before and is dropped again.
  const std::uint64_t end = offset + data.size();
  const std::uint64_t gap_end = idx.head + idx.dropped;
  bool ok = true;
  if (offset < idx.head) {
    std::uint64_t n = std::min(end, idx.head) - offset;
    ok = WriteAll(fd, data.substr(0, n), static_cast<off_t>(offset));
  }
  const std::uint64_t from = std::max(offset, gap_end);
  if (ok && from < end) {
    ok = WriteAll(fd, data.substr(from - offset), static_cast<off_t>(from - idx.dropped));
  }
  if (!ok) {
    ::close(fd);
    return Fail(Code::kInternal, fmt::format("short write to log {}", file.string()));
  }
  Status st = Ok();
  if (limit > 0 && FileSize(fd) > limit + limit / 4) st = Trim(path, idx, fd, limit);
  ::close(fd);
  return st;
}

Result<std::uint64_t> SyncRunLog(const fs::path& path) {
  Index idx;
  int fd = OpenCurrent(path, idx);
  if (fd < 0) {
    if (errno == ENOENT) return std::uint64_t{0};  // nothing was ever written
    return Fail(Code::kInternal, fmt::format("cannot open log {} to sync it: {}", path.string(),
                                             std::strerror(errno)));
  }
  const std::uint64_t received = FileSize(fd) + idx.dropped;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0) {
    return Fail(Code::kInternal,
                fmt::format("cannot sync log {}: {}", path.string(), std::strerror(err)));
  }
  // The index (after a trim) was made durable by WriteIndex; the entries of
  // the file and of its directory are made durable here.
  for (const fs::path& dir : {path.parent_path(), path.parent_path().parent_path()}) {
    if (int e = SyncDir(dir); e != 0) {
      return Fail(Code::kInternal,
                  fmt::format("cannot sync directory {}: {}", dir.string(), std::strerror(e)));
    }
  }
  return received;
}

std::uint64_t RunLogReceived(const fs::path& path) {
  Index idx;
  int fd = OpenCurrent(path, idx);
  if (fd < 0) return 0;
  std::uint64_t received = FileSize(fd) + idx.dropped;
  ::close(fd);
  return received;
}

RunLogSlice ReadRunLog(const fs::path& path, std::uint64_t from, std::size_t max,
                       std::uint64_t limit) {
  RunLogSlice out;
  out.next = from;
  Index idx;
  int fd = OpenCurrent(path, idx);
  if (fd < 0) return out;
  const View v = ViewOf(idx, FileSize(fd), limit);
  std::uint64_t until = v.received;
  if (from >= v.head && from < v.tail_from) {
    bool at_line_start = true;
    if (v.head > 0) {
      char last = '\n';
      if (::pread(fd, &last, 1, static_cast<off_t>(FileOffset(idx, v.head - 1))) == 1) {
        at_line_start = last == '\n';
      }
    }
    // A reader that starts past the head (or fell behind a trim) still
    // learns that bytes are missing, and how many.
    out.data = Marker(v.tail_from - from, limit, from != v.head || at_line_start);
    out.next = v.tail_from;
    ::close(fd);
    return out;
  }
  if (from < v.head) until = v.head;
  if (from < until) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(until - from, max));
    out.data.resize(want);
    ssize_t n = ::pread(fd, out.data.data(), want, static_cast<off_t>(FileOffset(idx, from)));
    out.data.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    out.next = from + out.data.size();
  }
  ::close(fd);
  return out;
}

namespace {

// The log as readers see it from `at` to its end.
std::string ReadRunLogFrom(const fs::path& path, std::uint64_t at, std::uint64_t limit) {
  std::string out;
  for (;;) {
    auto slice = ReadRunLog(path, at, 1 << 20, limit);
    if (slice.data.empty()) break;
    out += slice.data;
    at = slice.next;
  }
  return out;
}

}  // namespace

std::string RunLogTail(const fs::path& path, std::size_t bytes, std::uint64_t limit) {
  const std::uint64_t received = RunLogReceived(path);
  return ReadRunLogFrom(path, received > bytes ? received - bytes : 0, limit);
}

std::string ReadWholeRunLog(const fs::path& path, std::uint64_t limit) {
  return ReadRunLogFrom(path, 0, limit);
}

}  // namespace berth::server
