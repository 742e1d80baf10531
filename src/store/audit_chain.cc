#include "store/audit_chain.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace berth::store {
namespace {

// The meta table is SqliteStore's; it is made here too (same definition) so
// the audit log can be opened on a database the store has not made yet.
constexpr std::string_view kAuditSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audit_log(
  seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, actor TEXT NOT NULL, tenant TEXT NOT NULL,
  action TEXT NOT NULL, object TEXT NOT NULL, before_json TEXT NOT NULL, after_json TEXT NOT NULL,
  request_id TEXT NOT NULL, source TEXT NOT NULL, outcome TEXT NOT NULL,
  prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_log_time ON audit_log(time_ms);
)sql";

// The advisory lock every chainer on PostgreSQL takes for its transaction:
// one chainer at a time, whichever connection or berthd it is ("berth-aud").
constexpr std::int64_t kPgAuditLockKey = 0x62657274682d6175;

void AddField(std::string& out, std::string_view name, std::string_view value) {
  out += fmt::format("{}={}:", name, value.size());
  out += value;
  out += '\n';
}

std::string Errno() {
  char buf[128];
  return strerror_r(errno, buf, sizeof(buf));
}

// Writes `text` to `path` so that a reader sees the old file or the new one,
// never a torn one, and the new one survives a power cut: temp file, fsync,
// rename, fsync of the directory.
Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Fail(Code::kUnavailable, fmt::format("cannot write {}: {}", tmp.string(), Errno()));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto msg = Errno();
      ::close(fd);
      return Fail(Code::kUnavailable, fmt::format("cannot write {}: {}", tmp.string(), msg));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    auto msg = Errno();
    ::close(fd);
    return Fail(Code::kUnavailable, fmt::format("cannot sync {}: {}", tmp.string(), msg));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Fail(Code::kUnavailable, fmt::format("cannot replace {}: {}", path.string(), Errno()));
  }
  int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Ok();
}

// What this process knows of one head file, shared by every connection that
// chains into it. Chaining itself needs no lock of its own: it runs inside a
// write transaction, and SQLite lets one writer in at a time. What is shared
// is the head file: the head it holds (read once, then kept as written, and
// read again only when the file changed behind Berth's back), and its
// writing, which committed changes share like a group commit: a writer
// thread of the file's own writes the newest committed head whenever the
// file is behind it, so no commit waits for the file's two fsyncs.
struct HeadFile {
  std::mutex mu;
  std::condition_variable written;     // the file moved, or nobody is writing it
  std::condition_variable work;        // the writer thread: committed moved on, or stop
  bool known = false;                  // `file` and `stamp` are up to date
  std::optional<AuditHead> file;       // what the file holds
  std::optional<AuditHead> committed;  // the newest head known committed
  bool writing = false;
  bool stopping = false;
  struct stat stamp {};
  std::thread writer;           // started by a Publish when none is running
  bool writer_running = false;  // false: `writer` has ended or was never started

  HeadFile() = default;
  HeadFile(const HeadFile&) = delete;
  HeadFile& operator=(const HeadFile&) = delete;
  // At exit: the writer writes what is still behind, then ends.
  ~HeadFile() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    work.notify_all();
    if (writer.joinable()) writer.join();
  }
  // Called with mu held.
  bool Behind() const { return committed && (!file || file->seq < committed->seq); }
};

HeadFile& HeadFileFor(const std::filesystem::path& path) {
  static std::mutex registry_mu;
  static std::map<std::string, std::unique_ptr<HeadFile>, std::less<>> registry;
  std::lock_guard lock(registry_mu);
  auto& slot = registry[path.string()];
  if (!slot) slot = std::make_unique<HeadFile>();
  return *slot;
}

bool SameStamp(const struct stat& a, const struct stat& b) {
  return a.st_ino == b.st_ino && a.st_dev == b.st_dev && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// `hf.file`, read again when the file is not the one last read or written.
// Called with hf.mu held.
void RefreshFileHead(HeadFile& hf, const std::filesystem::path& path) {
  struct stat now {};
  const bool exists = ::stat(path.c_str(), &now) == 0;
  if (hf.known && ((exists && SameStamp(now, hf.stamp)) || (!exists && !hf.file))) return;
  auto read = AuditFileHead(path);  // an unreadable head file is Verify's to report
  hf.file = read ? *read : std::nullopt;
  hf.stamp = now;
  hf.known = true;
}

// Writes `head` to the file (hf.mu not held) and records it (held again).
// `head` is a copy: hf.committed moves on while the file is written.
void WriteHead(HeadFile& hf, const std::filesystem::path& path, std::unique_lock<std::mutex>& lock,
               AuditHead head) {
  hf.writing = true;
  lock.unlock();
  nlohmann::json doc{{"seq", head.seq}, {"hash", head.hash}};
  Status st = WriteFileAtomically(path, doc.dump() + "\n");
  struct stat now {};
  const bool stamped = st && ::stat(path.c_str(), &now) == 0;
  lock.lock();
  hf.writing = false;
  if (stamped) {
    hf.file = std::move(head);
    hf.stamp = now;
    hf.known = true;
  } else {
    hf.known = false;
    spdlog::error("audit: could not write {}: {}", path.string(),
                  st ? std::string("cannot stat it") : st.error().message);
  }
  hf.written.notify_all();
}

// The writer thread of one head file: whenever the file is behind the
// newest committed head and nobody else is writing it, writes that head (one
// write covers every commit since the last). A failed write is logged by
// WriteHead and tried again at the next commit (or by FlushAuditHead, which
// returns the error). After a write it rests kWriterGap, so under a stream
// of commits the file costs at most a hundred writes a second (each is two
// fsyncs) and one write covers every commit of the gap; the lag stays far
// below kMaxAuditLag, which Chain enforces anyway. Idle for kWriterIdle, the
// thread ends (a process may open many stores, as the tests do); the next
// Publish starts another. At stop it writes what is still behind once more
// and ends.
constexpr auto kWriterGap = std::chrono::milliseconds(10);
constexpr auto kWriterIdle = std::chrono::seconds(5);

void WriteBehind(HeadFile& hf, const std::filesystem::path& path) {
  std::unique_lock lock(hf.mu);
  std::int64_t failed_at = -1;  // the head whose write failed last
  for (;;) {
    const bool woke = hf.work.wait_for(lock, kWriterIdle, [&] {
      return hf.stopping || (hf.Behind() && !hf.writing && hf.committed->seq != failed_at);
    });
    if (hf.stopping) {
      while (hf.writing) hf.written.wait(lock);
      if (hf.Behind() && hf.committed->seq != failed_at) WriteHead(hf, path, lock, *hf.committed);
      hf.writer_running = false;
      return;
    }
    if (!woke) {
      hf.writer_running = false;
      return;
    }
    const std::int64_t seq = hf.committed->seq;
    WriteHead(hf, path, lock, *hf.committed);
    failed_at = hf.known ? -1 : seq;
    hf.work.wait_for(lock, kWriterGap, [&] { return hf.stopping; });
  }
}

}  // namespace

std::string AuditCanonicalText(const AuditEntry& e) {
  std::string out = "berth-audit-v1\n";
  AddField(out, "seq", std::to_string(e.seq));
  AddField(out, "time_ms", std::to_string(e.time_ms));
  AddField(out, "actor", e.actor);
  AddField(out, "tenant", e.tenant);
  AddField(out, "action", e.action);
  AddField(out, "object", e.object);
  AddField(out, "before", e.before);
  AddField(out, "after", e.after);
  AddField(out, "request_id", e.request_id);
  AddField(out, "source", e.source);
  AddField(out, "outcome", e.outcome);
  // The link to the record before: without it a record could be moved or
  // the one before it replaced without this hash changing.
  AddField(out, "prev_hash", e.prev_hash);
  return out;
}

Result<std::string> AuditHash(const AuditEntry& e) {
  const std::string text = AuditCanonicalText(e);
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha256(), nullptr) != 1) {
    return Fail(Code::kInternal, "audit: SHA-256 failed (OpenSSL EVP_Digest)");
  }
  std::string hex;
  hex.reserve(std::size_t{len} * 2);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

Status EnsureAuditSchema(Database& db) {
  return db.Exec(SchemaFor(db.dialect(), kAuditSchema));
}

Result<std::optional<AuditHead>> AuditMetaHead(Database& db) {
  auto st = db.Prepare(
      "SELECT (SELECT value FROM meta WHERE key='audit_head_seq'), "
      "(SELECT value FROM meta WHERE key='audit_head_hash')");
  if (!st) return std::unexpected(st.error());
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row || !st->OptInt(0)) return std::optional<AuditHead>();
  return std::optional<AuditHead>(AuditHead{*st->OptInt(0), st->Text(1)});
}

Result<std::optional<AuditHead>> AuditFileHead(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<AuditHead>();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("seq") ||
      !doc["seq"].is_number_integer() || !doc.contains("hash") || !doc["hash"].is_string()) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} is not a head file Berth wrote", file.string()));
  }
  return std::optional<AuditHead>(
      AuditHead{doc["seq"].get<std::int64_t>(), doc["hash"].get<std::string>()});
}

Result<AuditAppend> AuditAppend::Chain(Database& db, std::filesystem::path head_file,
                                       std::span<AuditEntry* const> records) {
  if (records.empty()) {
    // Nothing to chain and nothing to publish: no lock, no head to read.
    return AuditAppend(std::move(head_file), std::nullopt);
  }
  if (db.dialect() == Dialect::kPostgres) {
    // SQLite lets one writer in at a time; PostgreSQL does not, so the
    // chain takes its lock until the transaction ends.
    auto lock = db.Prepare(fmt::format("SELECT pg_advisory_xact_lock({})", kPgAuditLockKey));
    if (!lock) return std::unexpected(lock.error());
    BERTH_RETURN_IF_ERROR(lock->Run());
  }
  auto meta = AuditMetaHead(db);
  if (!meta) return std::unexpected(meta.error());
  AuditHead head{0, std::string(kAuditGenesisHash)};
  if (*meta) head = **meta;
  {
    auto tail = db.Prepare("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1");
    if (!tail) return std::unexpected(tail.error());
    auto row = tail->Step();
    if (!row) return std::unexpected(row.error());
    if (*row && tail->Int(0) > head.seq) head = AuditHead{tail->Int(0), tail->Text(1)};
  }
  if (head_file.empty()) return ChainRows(db, std::move(head_file), head, 1, records);
  HeadFile& hf = HeadFileFor(head_file);
  // Records the head file may not hold yet, should berthd die now: they
  // start after the head the file holds (Verify allows exactly that lag).
  std::int64_t unwritten_from = 1;
  {
    std::unique_lock lock(hf.mu);
    RefreshFileHead(hf, head_file);
    if (hf.file && hf.file->seq > head.seq) head = *hf.file;
  }
  {
    // Bound the lag: wait for the changes committed before this one to be
    // written to the head file (or write it) when it would pass
    // kMaxAuditLag. Holding the write transaction is safe: writing the file
    // needs no database lock.
    std::unique_lock lock(hf.mu);
    const auto n = static_cast<std::int64_t>(records.size());
    auto behind = [&] { return head.seq + n - (hf.file ? hf.file->seq : 0); };
    while (behind() > static_cast<std::int64_t>(kMaxAuditLag)) {
      if (hf.writing) {
        hf.written.wait(lock);
        continue;
      }
      if (!hf.committed || (hf.file && hf.file->seq >= hf.committed->seq)) break;
      WriteHead(hf, head_file, lock, *hf.committed);
      if (!hf.known) break;  // logged; the change still commits
    }
    unwritten_from = std::min(head.seq + 1, (hf.file ? hf.file->seq : 0) + 1);
  }
  return ChainRows(db, std::move(head_file), head, unwritten_from, records);
}

Result<AuditAppend> AuditAppend::ChainRows(Database& db, std::filesystem::path head_file,
                                           AuditHead head, std::int64_t unwritten_from,
                                           std::span<AuditEntry* const> records) {
  auto ins = db.Prepare(
      "INSERT INTO audit_log(seq, time_ms, actor, tenant, action, object, before_json, "
      "after_json, request_id, source, outcome, prev_hash, hash) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return std::unexpected(ins.error());
  for (AuditEntry* entry : records) {
    entry->seq = head.seq + 1;
    entry->prev_hash = head.hash;
    auto hash = AuditHash(*entry);
    if (!hash) return std::unexpected(hash.error());
    entry->hash = std::move(*hash);
    ins->Bind(1, entry->seq)
        .Bind(2, entry->time_ms)
        .Bind(3, entry->actor)
        .Bind(4, entry->tenant)
        .Bind(5, entry->action)
        .Bind(6, entry->object)
        .Bind(7, entry->before)
        .Bind(8, entry->after)
        .Bind(9, entry->request_id)
        .Bind(10, entry->source)
        .Bind(11, entry->outcome)
        .Bind(12, entry->prev_hash)
        .Bind(13, entry->hash);
    BERTH_RETURN_IF_ERROR(ins->Run());
    ins->Reset();
    head = AuditHead{entry->seq, entry->hash};
  }
  auto set = db.Prepare(
      "INSERT INTO meta(key, value) VALUES('audit_head_seq', ?), ('audit_head_hash', ?), "
      "('audit_batch_first', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  if (!set) return std::unexpected(set.error());
  BERTH_RETURN_IF_ERROR(set->Bind(1, std::to_string(head.seq))
                            .Bind(2, head.hash)
                            .Bind(3, std::to_string(unwritten_from))
                            .Run());
  return AuditAppend(std::move(head_file), std::move(head));
}

void AuditAppend::Publish() {
  if (!head_ || head_file_.empty()) return;
  // After the commit: the head file's writer thread takes it from here. A
  // crash before its write leaves the file behind by the records the meta
  // table says it may not hold yet (Verify), at most kMaxAuditLag.
  HeadFile& hf = HeadFileFor(head_file_);
  {
    std::lock_guard lock(hf.mu);
    if (!hf.committed || hf.committed->seq < head_->seq) hf.committed = *head_;
    if (!hf.writer_running) {
      // An ended writer has let go of the lock for good: joining it is quick.
      if (hf.writer.joinable()) hf.writer.join();
      hf.writer_running = true;
      hf.writer = std::thread([&hf, path = head_file_] { WriteBehind(hf, path); });
    }
  }
  hf.work.notify_one();
}

Status FlushAuditHead(const std::filesystem::path& head_file) {
  if (head_file.empty()) return Ok();
  HeadFile& hf = HeadFileFor(head_file);
  std::unique_lock lock(hf.mu);
  while (hf.Behind()) {
    if (hf.writing) {
      hf.written.wait(lock);
      continue;
    }
    WriteHead(hf, head_file, lock, *hf.committed);
    if (!hf.known) {
      return Fail(Code::kUnavailable, fmt::format("audit: could not write {}", head_file.string()));
    }
  }
  return Ok();
}

Status CommitWithRecords(Transaction& tx, Database& db, const std::filesystem::path& head_file,
                         std::span<AuditEntry> records) {
  if (records.empty()) return tx.Commit();
  std::vector<AuditEntry*> chained;
  chained.reserve(records.size());
  for (auto& r : records) chained.push_back(&r);
  auto append = AuditAppend::Chain(db, head_file, chained);
  if (!append) return std::unexpected(append.error());
  BERTH_RETURN_IF_ERROR(tx.Commit());
  append->Publish();
  return Ok();
}

}  // namespace berth::store
