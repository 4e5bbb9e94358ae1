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
  // Upkeep of a trained IVF index while items come and go (docs/concepts.md,
  // "Coarse indexes"; CollectionStats::index_upkeep_note): once the vectors
  // inserted or removed since the index was trained or last checked reach
  // this fraction of the collection's live items, the write that gets there
  // has the collection check the index in the background: it measures the
  // stage-1 recall estimate as the tuning does (the default nprobe against
  // the exact coarse top-100), with 100 of its newest live items as queries
  // (from the newest this fraction of them, at least 1,000). 0: never
  // check. Must be >= 0.
  double index_recheck_fraction = 0.1;
  // A check that measures a recall estimate below this (or below the
  // estimate fitted at training less 0.02, where that is lower: data that
  // no nprobe serves to 0.95 is not retrained over and over) retrains the
  // index in the background: k-means on the live items, all of them added,
  // nprobe fitted again; searches use the old index meanwhile (if the
  // estimate is already under the tuning target of 0.95, with nprobe raised,
  // up to twice the fitted one, where that reaches it), writes go on and are
  // caught up, and the new index is swapped in and its file saved at the
  // sequence it covers. In [0, 1]; 1 retrains at every check (the crash
  // harness's kill mix, bench/crash_harness.cc). The default, above the target, starts the
  // retrain while the old index still serves 0.95: in bench/churn_run.py
  // the estimate fell about 0.01 per 10% of the items replaced.
  double index_retrain_recall = 0.97;
  // A check also retrains the index (the same background retrain) when its
  // IVF lists have become more than this many times as unbalanced as right
  // after the last training, whatever the recall. The imbalance is FAISS's
  // imbalance_factor, nlist * sum(size^2) / (sum size)^2: what a query
  // whose probes land on lists in proportion to their sizes scans, over
  // n / nlist (1 for even lists). The baseline is its value on the items
  // k-means clustered (CollectionStats::index_imbalance_baseline): 1.13 in
  // tests/engine/churn_test.cc, 1.18-1.28 in bench/churn_run.py, where a
  // fresh index of the same items had 1.18-1.30. As the data moves, lists
  // trained on older items fill unevenly: recall can hold while every
  // search scans more vectors at the same nprobe (the 5M churn runbook: p50
  // 1.1-1.4 times a fresh index's; its 1M run reached imbalances of 1.3-3.0
  // with recall-only retrains). The default,
  // 1.5, retrains once a query scans half as much again as on the fresh
  // lists: the churn runbook allows 1.5 times a fresh index's latency, and
  // a retrain (k-means over the live items) should buy back more than the
  // spread between trainings (the baselines of successive retrains there
  // differed by up to 0.08). 0: never for imbalance; otherwise >= 1.
  double index_retrain_imbalance = 1.5;
  // Run a due check, and the retrain it may start, inside the write that
  // made it due, before that write returns, instead of in the collection's
  // background thread: deterministic, for tests and benchmarks.
  bool index_upkeep_inline = false;
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
