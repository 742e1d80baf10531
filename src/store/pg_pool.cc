#include "store/pg_pool.h"

#include <fmt/format.h>

#include <algorithm>

namespace berth::store {

PgPool::Handle::~Handle() {
  if (conn_ != nullptr) pool_->GiveBack(std::move(conn_));
}

PgPool::PgPool(std::string conninfo, std::size_t max_size)
    : conninfo_(std::move(conninfo)), max_size_(std::max<std::size_t>(1, max_size)) {}

Result<PgPool::Handle> PgPool::Acquire(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<PgConnection> conn = std::move(idle_.back());
      idle_.pop_back();
      if (conn->CheckAlive()) return Handle(this, std::move(conn));
      // Lost while idle: closed here (PQfinish of a dead socket does not
      // wait), and its place is free for a new connection.
      --open_;
      conn.reset();
    }
    if (open_ < max_size_) {
      ++open_;
      lock.unlock();
      auto conn = PgConnection::Open(conninfo_);
      if (!conn) {
        lock.lock();
        --open_;
        returned_.notify_one();
        return std::unexpected(std::move(conn.error()));
      }
      return Handle(this, std::make_unique<PgConnection>(std::move(*conn)));
    }
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= max_size_) {
      return Fail(Code::kUnavailable,
                  fmt::format("store: no PostgreSQL connection free within {} ms ({} of {} in use)",
                              timeout.count(), open_, max_size_));
    }
  }
}

void PgPool::GiveBack(std::unique_ptr<PgConnection> conn) {
  // A lost connection fails every later command; one given back inside a
  // transaction would carry its locks and writes to the next borrower.
  const bool keep = !conn->broken() && !conn->in_transaction();
  {
    std::lock_guard lock(mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  returned_.notify_one();
  conn.reset();  // closes a dropped connection outside the lock
}

std::size_t PgPool::open() const {
  std::lock_guard lock(mu_);
  return open_;
}

std::size_t PgPool::idle() const {
  std::lock_guard lock(mu_);
  return idle_.size();
}

}  // namespace berth::store
