// A small pool of PostgreSQL connections shared by threads. At most
// `max_size` connections are open at once; Acquire lends an idle one, opens a
// new one below the bound, or waits for one to come back, up to a timeout.
// A connection that is lost (its backend terminated, the server gone) is
// closed and never lent again, so one dead connection costs one failed
// command, not one per borrower.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/pg_db.h"

namespace berth::store {

class PgPool {
 public:
  // A connection lent by the pool; it goes back when the handle is
  // destroyed, or is closed when it is lost or still inside a transaction.
  class Handle {
   public:
    Handle(Handle&& o) noexcept : pool_(o.pool_), conn_(std::move(o.conn_)) {}
    Handle& operator=(Handle&&) = delete;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();
    PgConnection& operator*() { return *conn_; }
    PgConnection* operator->() { return conn_.get(); }

   private:
    friend class PgPool;
    Handle(PgPool* pool, std::unique_ptr<PgConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    PgPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // Connects lazily, with `conninfo` (see PgConnection::Open). Every handle
  // must be destroyed before the pool.
  PgPool(std::string conninfo, std::size_t max_size);
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;
  ~PgPool() = default;

  // A connection within `timeout`, else kUnavailable naming the bound. A
  // failure to connect is returned at once, as PgConnection::Open reports it.
  [[nodiscard]] Result<Handle> Acquire(std::chrono::milliseconds timeout);

  // Connections open: lent, idle and being opened.
  std::size_t open() const;
  std::size_t idle() const;
  std::size_t max_size() const { return max_size_; }

 private:
  void GiveBack(std::unique_ptr<PgConnection> conn);

  const std::string conninfo_;
  const std::size_t max_size_;
  mutable std::mutex mu_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // guarded by mu_
  // Invariant: open_ = idle_.size() + lent + being opened <= max_size_.
  std::size_t open_ = 0;  // guarded by mu_
};

}  // namespace berth::store
