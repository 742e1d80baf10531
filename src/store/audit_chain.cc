#include "store/audit_chain.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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

// One process appends to one chain at a time, from any connection
// (AuditAppend).
std::mutex& ChainMutex() {
  static std::mutex mu;
  return mu;
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
  return db.Exec(kAuditSchema);
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
    return AuditAppend(std::unique_lock<std::mutex>(), std::move(head_file), AuditHead{});
  }
  std::unique_lock lock(ChainMutex());
  auto meta = AuditMetaHead(db);
  if (!meta) return std::unexpected(meta.error());
  AuditHead head{0, std::string(kAuditGenesisHash)};
  if (*meta) head = **meta;
  auto file = AuditFileHead(head_file);  // an unreadable head file is Verify's to report
  if (file && *file && (*file)->seq > head.seq) head = **file;
  {
    auto tail = db.Prepare("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1");
    if (!tail) return std::unexpected(tail.error());
    auto row = tail->Step();
    if (!row) return std::unexpected(row.error());
    if (*row && tail->Int(0) > head.seq) head = AuditHead{tail->Int(0), tail->Text(1)};
  }
  auto ins = db.Prepare(
      "INSERT INTO audit_log(seq, time_ms, actor, tenant, action, object, before_json, "
      "after_json, request_id, source, outcome, prev_hash, hash) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return std::unexpected(ins.error());
  const std::int64_t batch_first = head.seq + 1;
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
      "INSERT OR REPLACE INTO meta(key, value) VALUES('audit_head_seq', ?), ('audit_head_hash', "
      "?), ('audit_batch_first', ?)");
  if (!set) return std::unexpected(set.error());
  BERTH_RETURN_IF_ERROR(set->Bind(1, std::to_string(head.seq))
                            .Bind(2, head.hash)
                            .Bind(3, std::to_string(batch_first))
                            .Run());
  return AuditAppend(std::move(lock), std::move(head_file), std::move(head));
}

Status AuditAppend::Publish() {
  if (!lock_.owns_lock()) return Ok();
  // After the commit: a crash here leaves the file behind the table by this
  // one batch, which Verify tells apart from tampering (the file's record
  // still matches, and the meta table says where the batch began).
  nlohmann::json doc{{"seq", head_.seq}, {"hash", head_.hash}};
  Status st = WriteFileAtomically(head_file_, doc.dump() + "\n");
  lock_.unlock();
  return st;
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
  if (auto st = append->Publish(); !st) {
    spdlog::error("audit: could not write {} after a commit: {}", head_file.string(),
                  st.error().message);
  }
  return Ok();
}

}  // namespace berth::store
