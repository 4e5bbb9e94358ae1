// Options for opening a database (plain struct, documented defaults).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace hedgedb {

struct Options {
  // Create the database directory if it does not exist.
  bool create_if_missing = true;
  // Fail if the database already exists.
  bool error_if_exists = false;
  // Open an existing database for reading only, beside a process that may
  // hold it open for writing (only one process at a time can; a second one
  // gets IOError "database ... is locked by another process"). The reader
  // sees the database as of the open, every acknowledged batch whole or
  // absent, until DB::CatchUp brings it to the writer's latest. It writes
  // nothing, anywhere: no index file (indexes are loaded, caught up or
  // rebuilt in memory), no log, no lock. Writes, Flush included, fail with
  // NotSupported. create_if_missing and error_if_exists are ignored.
  bool read_only = false;
  // fsync the write-ahead log before acknowledging each write. With false (the
  // default) an acknowledged batch survives a process crash (the WAL is written
  // before Ingest returns) but not a power loss; with true it survives both.
  bool sync = false;
  // Save a collection's coarse index file after this many new vectors since the
  // last save (0: only on Flush/close). Records are durable regardless: an
  // index file behind the records is caught up on open.
  int64_t index_save_interval = 0;
  // OpenMP threads for FAISS and rescoring inside Open, Ingest and Search
  // (index training and adds, coarse search, batches of queries); 0 keeps the
  // OpenMP default (OMP_NUM_THREADS or the core count). Set 1 when the
  // application runs many searches in parallel threads itself.
  int threads = 0;
  // Called (if set) with a warning the caller should show: a collection that
  // lost acknowledged writes when it opens (CollectionStats::lost_writes), an
  // index file of a collection the store no longer has. Calls may come from
  // any thread that uses the database.
  std::function<void(const std::string&)> on_warning;
};

}  // namespace hedgedb
