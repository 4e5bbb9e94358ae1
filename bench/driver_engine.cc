// End-to-end engine benchmarks (issue targets), each reported as a ratio
// against a baseline measured in the same run:
//   search: two-stage recall@10 of the exhaustive exact `mc` top-10 and latency,
//           over candidate counts and FAISS knobs, vs exhaustive latency
//   ingest: Gaussian items/s with the WAL on (sync off and on; --sync 0 or 1
//           runs one)
//   reopen: open time of a large collection whose index file is loaded, vs the
//           open time when the index file is missing and must be rebuilt
//   remove: two-stage recall@10 against the exhaustive top-10 before and after
//           removing items (3, then half) and after a reopen, per index type
//   throughput: per kind (point, gaussian, mog C=2, codes), resident memory
//           per item after ingest and flush, and queries per second of
//           batched search (batches of 100) with 1 and 2 threads, with the
//           recall@10 of those searches against the exhaustive top-10
//   filter: filtered search (labels kept by 50%, 5%, 0.1% of the items, and a
//           payload field kept by 5%): recall@10 of the exhaustive filtered
//           top-10 and latency, vs unfiltered two-stage and exhaustive filtered
//   paged:  a collection larger than the memory it may use: searches in a
//           cgroup memory limit that leaves the page cache half the arena's
//           bytes (the arena mapped from its snapshot, the page cache
//           dropped), answers compared with an unlimited run
//   curve:  the two-stage curve of an existing collection (real embeddings,
//           bench/real_embeddings.py): recall@k of the exhaustive exact top-k
//           and latency, one query at a time, for the default settings and a
//           sweep of candidates x nprobe (or efSearch); queries from .npy
//           files PREFIX.mean.npy/.var.npy[/.weights.npy] or PREFIX.vec.npy,
//           one recall column per [NAME=]PREFIX; prints a markdown table
//
//   bin/driver_engine search --n 100000 --dim 64 --queries 200
//   bin/driver_engine ingest --n 200000 --dim 64
//   bin/driver_engine reopen --n 1000000 --dim 64
//   bin/driver_engine remove --n 100000 --dim 32 --factories "IVF1024,Flat;Flat;HNSW32"
//   bin/driver_engine filter --n 100000 --dim 64 --factories "IVF1024,Flat;HNSW32"
//   bin/driver_engine throughput --n 1000000 --dim 64 --queries 1000 --kind gaussian
//   bin/driver_engine paged --n 1000000 --dim 64 --queries 200
//   bin/driver_engine curve --db DB --collection NAME --queries clean=Q1,occluded=Q2
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "hedgedb/db.h"
#include "hedgedb/npy.h"

namespace {

using hedgedb::CollectionSpec;
using hedgedb::CollectionStats;
using hedgedb::DB;
using hedgedb::EmbeddingView;
using hedgedb::IngestBatch;
using hedgedb::Kind;
using hedgedb::Options;
using hedgedb::SearchOptions;
using hedgedb::SearchResult;
using hedgedb::Status;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds of this process so far, every thread (RocksDB's flushes and
// compactions included): on a shared machine, less noisy than wall time.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// Clustered Gaussian embeddings: 1000 class centres, item means around them,
// per-item variance scales spread log-uniformly over two orders of magnitude.
struct GaussianData {
  int64_t n = 0;
  int dim = 0;
  std::vector<float> mean, var;
};

GaussianData MakeData(int64_t n, int dim, uint64_t seed, int classes) {
  if (classes <= 0) classes = int(std::min<int64_t>(n, 1 << 20));  // unclustered
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  std::mt19937_64 centre_rng(42);  // the same centres for items and queries
  std::vector<float> centres(size_t(classes) * dim);
  for (auto& c : centres) c = normal(centre_rng);
  GaussianData d;
  d.n = n;
  d.dim = dim;
  d.mean.resize(size_t(n) * dim);
  d.var.resize(size_t(n) * dim);
  for (int64_t i = 0; i < n; ++i) {
    const int c = int(rng() % uint64_t(classes));
    // Variance traces from 0.01 D to D: comparable to the within-class squared
    // distances (~0.25 D), so uncertainty changes the ranking.
    const float scale = 0.01f * std::pow(100.0f, uni(rng));
    for (int j = 0; j < dim; ++j) {
      d.mean[size_t(i) * dim + j] = centres[size_t(c) * dim + j] + 0.35f * normal(rng);
      d.var[size_t(i) * dim + j] = scale * (0.5f + uni(rng));
    }
  }
  return d;
}

std::unique_ptr<DB> OpenDb(const std::string& path, Options options = Options()) {
  std::unique_ptr<DB> db;
  Check(DB::Open(options, path, &db), "open");
  return db;
}

// A fresh database at `path` with one Gaussian collection "g".
std::unique_ptr<DB> FreshCollection(const std::string& path, int dim, const std::string& factory,
                                    Options options = Options()) {
  std::filesystem::remove_all(path);
  auto db = OpenDb(path, options);
  CollectionSpec spec;
  spec.name = "g";
  spec.kind = Kind::kGaussian;
  spec.dim = dim;
  spec.index_factory = factory;
  spec.match_a = 1.0f;
  spec.match_b = 0.0f;
  Check(db->CreateCollection(spec), "create");
  return db;
}

// Ingests rows [begin, end) of d (all rows by default) in batches; row i gets id i.
void Ingest(DB* db, const std::string& name, const GaussianData& d, int64_t batch,
            int64_t begin = 0, int64_t end = -1) {
  if (end < 0) end = d.n;
  for (int64_t first = begin; first < end; first += batch) {
    IngestBatch b;
    b.data.n = std::min(batch, end - first);
    b.data.mean = d.mean.data() + first * d.dim;
    b.data.var = d.var.data() + first * d.dim;
    std::vector<int64_t> ids(static_cast<size_t>(b.data.n));
    for (int64_t i = 0; i < b.data.n; ++i) ids[i] = first + i;
    b.ids = ids.data();
    Check(db->Ingest(name, b, nullptr), "ingest");
  }
}

struct Args {
  std::string mode;
  int64_t n = 100000;
  int dim = 64;
  int queries = 200;
  int k = 10;
  int classes = 1000;  // 0: unclustered (every item its own centre)
  std::string kind;    // throughput: only this kind (empty: all four)
  int sync = -1;       // ingest: Options::sync 0 or 1 only (-1: both)
  std::string dir;
  // curve: an existing database and collection, query file prefixes, and the
  // sweep (empty: the defaults of RunCurve)
  std::string db, collection;
  std::vector<std::string> query_prefixes;
  std::vector<int> knobs;
  std::vector<int64_t> candidates;
  int repeats = 5;       // timed rounds over all rows; each row's fastest is reported
  int64_t cache_mb = 0;  // paged: the page cache allowed (0: half the arena)
  std::vector<std::string> factories = {"Flat", "HNSW32", "IVF1024,Flat"};
};

// The non-empty pieces of `v` between separators.
std::vector<std::string> SplitList(const std::string& v, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= v.size()) {
    size_t e = v.find(sep, p);
    if (e == std::string::npos) e = v.size();
    if (e > p) out.push_back(v.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

// Runs each query alone (latency of one query on one core); returns per-query
// results and mean seconds per query.
double TimeQueries(DB* db, const std::string& name, const GaussianData& q, const SearchOptions& opt,
                   std::vector<SearchResult>* all) {
  all->clear();
  auto t0 = Clock::now();
  for (int64_t i = 0; i < q.n; ++i) {
    EmbeddingView v;
    v.n = 1;
    v.mean = q.mean.data() + i * q.dim;
    v.var = q.var.data() + i * q.dim;
    std::vector<SearchResult> r;
    Check(db->Search(name, v, opt, &r), "search");
    all->push_back(std::move(r[0]));
  }
  return Seconds(t0, Clock::now()) / double(q.n);
}

double Recall(const std::vector<SearchResult>& got, const std::vector<SearchResult>& truth, int k) {
  double hits = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    std::unordered_set<int64_t> t;
    for (int j = 0; j < k && j < int(truth[i].hits.size()); ++j) t.insert(truth[i].hits[j].id);
    for (int j = 0; j < k && j < int(got[i].hits.size()); ++j) hits += t.count(got[i].hits[j].id);
  }
  return hits / double(got.size() * k);
}

int RunSearch(const Args& a) {
  omp_set_num_threads(1);  // latency on one core
  GaussianData items = MakeData(a.n, a.dim, 1, a.classes),
               queries = MakeData(a.queries, a.dim, 2, a.classes);
  std::printf("# search: n=%lld D=%d queries=%d k=%d score=mc K=8, one query at a time, 1 thread\n",
              (long long)a.n, a.dim, a.queries, a.k);
  std::printf("%-14s %-10s %8s %8s %10s %10s %9s\n", "index", "knob", "cands", "recall", "ms/query",
              "exh ms/q", "speedup");
  for (const std::string& factory : a.factories) {
    std::string path = a.dir + "/search-" + std::to_string(std::hash<std::string>()(factory));
    auto db = FreshCollection(path, a.dim, factory);
    auto t0 = Clock::now();
    Ingest(db.get(), "g", items, 10000);
    Check(db->Flush(), "flush");  // trains the index
    double ingest_s = Seconds(t0, Clock::now());
    SearchOptions exh;
    exh.k = a.k;
    exh.exhaustive = true;
    exh.with_uncertainty = false;
    std::vector<SearchResult> truth, got;
    double exh_s = TimeQueries(db.get(), "g", queries, exh, &truth);
    std::printf("%-14s %-10s %8s %8.3f %10.3f %10.3f %9.1f   (ingest %.1f s)\n", factory.c_str(),
                "-", "all", 1.0, exh_s * 1e3, exh_s * 1e3, 1.0, ingest_s);
    std::vector<int> knobs = {0};
    const char* knob_name = "-";
    if (factory.rfind("IVF", 0) == 0) {
      knobs = {8, 16, 32, 64};
      knob_name = "nprobe";
    } else if (factory.rfind("HNSW", 0) == 0) {
      knobs = {32, 64, 128};
      knob_name = "efSearch";
    }
    for (int knob : knobs) {
      for (int64_t cands : {20, 50, 100, 200, 500, 1000}) {
        SearchOptions opt = exh;
        opt.exhaustive = false;
        opt.candidates = cands;
        if (factory.rfind("IVF", 0) == 0) opt.nprobe = knob;
        if (factory.rfind("HNSW", 0) == 0) opt.ef_search = std::max<int>(knob, int(cands));
        double s = TimeQueries(db.get(), "g", queries, opt, &got);
        char knob_text[32];
        std::snprintf(knob_text, sizeof(knob_text), "%s=%d", knob_name,
                      factory.rfind("HNSW", 0) == 0 ? opt.ef_search : knob);
        std::printf("%-14s %-10s %8lld %8.3f %10.3f %10.3f %9.1f\n", factory.c_str(),
                    knob ? knob_text : "-", (long long)cands, Recall(got, truth, a.k), s * 1e3,
                    exh_s * 1e3, exh_s / s);
      }
    }
    db.reset();
    std::filesystem::remove_all(path);
  }
  return 0;
}

// Two-stage recall@k (default knobs) against the exhaustive top-k, before and
// after removals and after a reopen, for each index type.
int RunRemove(const Args& a) {
  omp_set_num_threads(1);
  GaussianData items = MakeData(a.n, a.dim, 1, a.classes),
               queries = MakeData(a.queries, a.dim, 2, a.classes);
  std::printf("# remove: n=%lld D=%d classes=%d queries=%d k=%d score=mc, default knobs\n",
              (long long)a.n, a.dim, a.classes, a.queries, a.k);
  std::printf("%-14s %10s %10s %10s %10s %10s   %s\n", "index", "before", "-3 items", "-half",
              "reopened", "+removed", "tuned stage 1 (stage-1 recall@100 estimate)");
  for (const std::string& factory : a.factories) {
    std::string path = a.dir + "/remove";
    SearchOptions two;
    two.k = a.k;
    two.with_uncertainty = false;
    SearchOptions exh = two;
    exh.exhaustive = true;
    std::vector<SearchResult> truth, got;
    auto recall = [&](DB* db) {
      TimeQueries(db, "g", queries, exh, &truth);
      TimeQueries(db, "g", queries, two, &got);
      return Recall(got, truth, a.k);
    };
    double r[4];
    char tuned[96] = "";
    int64_t removed_returned = 0;
    {
      auto db = FreshCollection(path, a.dim, factory);
      Ingest(db.get(), "g", items, 10000);
      Check(db->Flush(), "flush");
      r[0] = recall(db.get());
      CollectionStats st;
      Check(db->GetStats("g", &st), "stats");
      std::snprintf(tuned, sizeof(tuned), "nprobe=%d ef=%d est=%.3f", st.index_nprobe,
                    st.index_ef_search, st.index_recall_estimate);
      std::vector<int64_t> three = {0, a.n / 2, a.n - 1};
      Check(db->Remove("g", three.data(), three.size(), nullptr), "remove");
      r[1] = recall(db.get());
      std::vector<int64_t> half;
      for (int64_t id = 2; id < a.n - 1; id += 2) {
        if (id != a.n / 2) half.push_back(id);
      }
      Check(db->Remove("g", half.data(), half.size(), nullptr), "remove");
      r[2] = recall(db.get());
    }
    {
      auto db = OpenDb(path);
      r[3] = recall(db.get());
      for (const SearchResult& res : got) {
        for (const auto& h : res.hits) removed_returned += (h.id % 2 == 0 || h.id == a.n - 1);
      }
    }
    std::printf("%-14s %10.3f %10.3f %10.3f %10.3f %10lld   %s\n", factory.c_str(), r[0], r[1],
                r[2], r[3], (long long)removed_returned, tuned);
    std::filesystem::remove_all(path);
  }
  return 0;
}

int RunIngest(const Args& a) {
  GaussianData items = MakeData(a.n, a.dim, 1, a.classes);
  std::printf("# ingest: n=%lld D=%d gaussian, batches of 10000, WAL on\n", (long long)a.n, a.dim);
  for (const std::string& factory : a.factories) {
    for (bool sync : {false, true}) {
      if (a.sync >= 0 && sync != (a.sync != 0)) continue;
      std::string path = a.dir + "/ingest";
      Options o;
      o.sync = sync;
      auto db = FreshCollection(path, a.dim, factory, o);
      // Phase 1 fills the collection up to the index's training point (IVF
      // trains once, at 39 * nlist items); phase 2 is steady-state ingest.
      const int64_t warm = std::min<int64_t>(a.n / 2, 50000);
      const double cpu0 = CpuSeconds();
      auto t0 = Clock::now();
      Ingest(db.get(), "g", items, 10000, 0, warm);
      Check(db->Flush(), "flush");  // ingest defers training to the next search or flush
      double s1 = Seconds(t0, Clock::now());
      t0 = Clock::now();
      Ingest(db.get(), "g", items, 10000, warm, a.n);
      double s2 = Seconds(t0, Clock::now());
      const double cpu = CpuSeconds() - cpu0;
      std::printf(
          "%-14s sync=%d  first %lld items (incl. index training) %.2f s; then %10.0f items/s; "
          "all %lld items %.2f s (CPU %.2f s)\n",
          factory.c_str(), int(sync), (long long)warm, s1, double(a.n - warm) / s2, (long long)a.n,
          s1 + s2, cpu);
      db.reset();
      std::filesystem::remove_all(path);
    }
  }
  return 0;
}

int RunReopen(const Args& a) {
  GaussianData items = MakeData(a.n, a.dim, 1, a.classes);
  std::printf("# reopen: n=%lld D=%d gaussian\n", (long long)a.n, a.dim);
  for (const std::string& factory : a.factories) {
    std::string path = a.dir + "/reopen";
    {
      auto db = FreshCollection(path, a.dim, factory);
      auto t0 = Clock::now();
      Ingest(db.get(), "g", items, 10000);
      double s = Seconds(t0, Clock::now());
      t0 = Clock::now();
      Check(db->Flush(), "flush");
      std::printf("%-14s ingest %.1f s (%.0f items/s), save index %.2f s\n", factory.c_str(), s,
                  double(a.n) / s, Seconds(t0, Clock::now()));
    }
    // Each reopen opens the collection (collections open on first use).
    auto reopen = [&](const char* what) {
      auto t0 = Clock::now();
      auto db = OpenDb(path);
      CollectionStats st;
      Check(db->GetStats("g", &st), "stats");
      const double open_s = Seconds(t0, Clock::now());
      std::printf("%-14s reopen, %-44s %.2f s (arena from %s, index covers seq %llu of %llu)\n",
                  factory.c_str(), what, open_s, st.arena_source.c_str(),
                  (unsigned long long)st.index_sequence, (unsigned long long)st.sequence);
      return open_s;
    };
    auto remove_files = [&](const std::string& extension) {
      for (const auto& e : std::filesystem::directory_iterator(path + "/index")) {
        if (extension.empty() || e.path().extension() == extension) {
          std::filesystem::remove(e.path());
        }
      }
    };
    const double both_s = reopen("index file and arena snapshot:");
    remove_files(".harena");
    const double index_only_s = reopen("index file; rows decoded, snapshot written:");
    (void)reopen("index file and arena snapshot (written back):");
    remove_files("");
    const double rebuilt_s = reopen("no files (index rebuilt, rows decoded):");
    std::printf(
        "%-14s the arena snapshot makes the reopen %.1fx faster; a rebuild is %.1fx slower\n",
        factory.c_str(), index_only_s / both_s, rebuilt_s / both_s);
    std::filesystem::remove_all(path);
  }
  return 0;
}

// Resident set size of this process, in bytes.
int64_t ResidentBytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return int64_t(resident) * int64_t(sysconf(_SC_PAGESIZE));
}

// One kind's collection of n items (D = a.dim; mog C = 2; codes d = a.dim,
// k = 16): memory per item and batched-search throughput.
int RunThroughput(const Args& a) {
  std::printf(
      "# throughput: n=%lld D=%d queries=%d (batches of 100) k=%d, default index and "
      "knobs, uncertainty off\n",
      (long long)a.n, a.dim, a.queries, a.k);
  std::printf("%-9s %14s %12s %12s %12s %10s\n", "kind", "RSS/item (B)", "ingest/s", "q/s 1 thr",
              "q/s 2 thr", "recall@10");
  const int64_t batch = 10000;
  for (const std::string kind_name : {"point", "gaussian", "mog", "codes"}) {
    // One kind per process gives a clean resident-memory figure (--kind).
    if (!a.kind.empty() && a.kind != kind_name) continue;
    Kind kind = Kind::kGaussian;
    hedgedb::ParseKind(kind_name, &kind);
    const std::string path = a.dir + "/throughput";
    std::filesystem::remove_all(path);
    const int64_t rss_before = ResidentBytes();
    auto db = OpenDb(path);
    CollectionSpec spec;
    spec.name = "t";
    spec.kind = kind;
    spec.dim = a.dim;
    if (kind == Kind::kMog) spec.components = 2;
    if (kind == Kind::kCodes) spec.code_k = 16;
    spec.samples = hedgedb::DefaultSamples(spec.components);
    Check(db->CreateCollection(spec), "create");
    const int C = spec.components, D = a.dim;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    // Clustered items (1000 centres); queries drawn like items.
    std::vector<float> centres(size_t(1000) * C * D);
    for (float& c : centres) c = normal(rng);
    auto make = [&](int64_t n, std::vector<float>* mean, std::vector<float>* var,
                    std::vector<int32_t>* codes) {
      mean->clear();
      var->clear();
      codes->clear();
      for (int64_t i = 0; i < n; ++i) {
        const size_t c = size_t(rng() % 1000);
        const float scale = 0.01f * std::pow(100.0f, uni(rng));
        for (int j = 0; j < C * D; ++j) {
          mean->push_back(centres[c * C * D + j] + 0.35f * normal(rng));
          var->push_back(scale * (0.5f + uni(rng)));
          if (kind == Kind::kCodes && j < D) {
            codes->push_back(int32_t((uint32_t(c) * 2654435761u + uint32_t(j) * 40503u +
                                      (uni(rng) < 0.2f ? uint32_t(rng()) : 0u)) %
                                     16u));
          }
        }
      }
    };
    std::vector<float> mean, var;
    std::vector<int32_t> codes;
    auto t0 = Clock::now();
    for (int64_t first = 0; first < a.n; first += batch) {
      const int64_t n = std::min(batch, a.n - first);
      make(n, &mean, &var, &codes);
      IngestBatch b;
      b.data.n = n;
      if (kind == Kind::kPoint) b.data.vec = mean.data();
      if (kind == Kind::kGaussian || kind == Kind::kMog) {
        b.data.mean = mean.data();
        b.data.var = var.data();
      }
      if (kind == Kind::kCodes) b.data.codes = codes.data();
      Check(db->Ingest("t", b, nullptr), "ingest");
    }
    Check(db->Flush(), "flush");
    const double ingest_s = Seconds(t0, Clock::now());
    const int64_t rss = ResidentBytes() - rss_before;
    // Queries: item-like rows; codes queries are log-prob tables peaked at a code.
    make(a.queries, &mean, &var, &codes);
    std::vector<float> logp;
    if (kind == Kind::kCodes) {
      for (int64_t i = 0; i < a.queries * D; ++i) {
        for (int s = 0; s < 16; ++s) {
          logp.push_back(s == codes[size_t(i)] ? std::log(0.7f) : std::log(0.3f / 15));
        }
      }
    }
    auto view_of = [&](int64_t first, int64_t n) {
      EmbeddingView v;
      v.n = n;
      if (kind == Kind::kPoint) v.vec = mean.data() + first * D;
      if (kind == Kind::kGaussian || kind == Kind::kMog) {
        v.mean = mean.data() + first * C * D;
        v.var = var.data() + first * C * D;
      }
      if (kind == Kind::kCodes) v.logp = logp.data() + first * D * 16;
      return v;
    };
    SearchOptions o;
    o.k = a.k;
    o.with_uncertainty = false;
    double qps[2] = {0, 0};
    std::vector<SearchResult> got;
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      got.clear();
      auto s0 = Clock::now();
      for (int64_t first = 0; first < a.queries; first += 100) {
        std::vector<SearchResult> r;
        Check(db->Search("t", view_of(first, std::min<int64_t>(100, a.queries - first)), o, &r),
              "search");
        got.insert(got.end(), r.begin(), r.end());
      }
      qps[threads - 1] = double(a.queries) / Seconds(s0, Clock::now());
    }
    // Recall on the first 50 queries (exhaustive search is slow at 1M items).
    const int64_t checked = std::min<int64_t>(50, a.queries);
    SearchOptions exh = o;
    exh.exhaustive = true;
    std::vector<SearchResult> truth;
    Check(db->Search("t", view_of(0, checked), exh, &truth), "exhaustive search");
    got.resize(size_t(checked));
    std::printf("%-9s %14.0f %12.0f %12.0f %12.0f %10.3f\n", kind_name.c_str(),
                double(rss) / double(a.n), double(a.n) / ingest_s, qps[0], qps[1],
                Recall(got, truth, a.k));
    std::fflush(stdout);
    db.reset();
    std::filesystem::remove_all(path);
  }
  return 0;
}

// Filtered search: items get labels i % 1000 and payloads {"group": i % 20},
// independent of their cluster, so a filter thins every neighbourhood alike.
int RunFilter(const Args& a) {
  omp_set_num_threads(1);
  GaussianData items = MakeData(a.n, a.dim, 1, a.classes),
               queries = MakeData(a.queries, a.dim, 2, a.classes);
  std::printf("# filter: n=%lld D=%d queries=%d k=%d score=mc K=8, one query at a time, 1 thread\n",
              (long long)a.n, a.dim, a.queries, a.k);
  std::printf("%-14s %-22s %9s %8s %10s %12s %12s %9s\n", "index", "filter", "passing", "recall",
              "ms/query", "unfilt ms/q", "exh filt ms/q", "speedup");
  for (const std::string& factory : a.factories) {
    std::string path = a.dir + "/filter";
    auto db = FreshCollection(path, a.dim, factory);
    const int64_t batch = 10000;
    for (int64_t first = 0; first < a.n; first += batch) {
      IngestBatch b;
      b.data.n = std::min(batch, a.n - first);
      b.data.mean = items.mean.data() + first * a.dim;
      b.data.var = items.var.data() + first * a.dim;
      std::vector<int64_t> ids(size_t(b.data.n)), labels(size_t(b.data.n));
      std::vector<std::string> payloads(size_t(b.data.n));
      for (int64_t i = 0; i < b.data.n; ++i) {
        ids[i] = first + i;
        labels[i] = (first + i) % 1000;
        payloads[i] = "{\"group\": " + std::to_string((first + i) % 20) + "}";
      }
      b.ids = ids.data();
      b.labels = labels.data();
      b.payloads = payloads.data();
      Check(db->Ingest("g", b, nullptr), "ingest");
    }
    Check(db->Flush(), "flush");
    SearchOptions plain;
    plain.k = a.k;
    plain.with_uncertainty = false;
    std::vector<SearchResult> truth, got;
    const double unfiltered_s = TimeQueries(db.get(), "g", queries, plain, &got);
    struct Case {
      const char* name;
      hedgedb::SearchFilter filter;
    };
    std::vector<Case> cases;
    for (int64_t keep : {500, 50, 1}) {
      hedgedb::SearchFilter f;
      f.label_rule = hedgedb::SearchFilter::LabelRule::kIn;
      for (int64_t l = 0; l < keep; ++l) f.labels.push_back(l);
      cases.push_back({keep == 500  ? "label in 500/1000"
                       : keep == 50 ? "label in 50/1000"
                                    : "label = 0",
                       f});
    }
    hedgedb::SearchFilter group;
    group.payload_equals = {{"group", "3"}};
    cases.push_back({"payload group = 3", group});
    for (const Case& c : cases) {
      SearchOptions opt = plain;
      opt.filter = c.filter;
      // The first payload search builds the payload index: time it apart.
      auto t0 = Clock::now();
      TimeQueries(db.get(), "g", MakeData(1, a.dim, 3, a.classes), opt, &got);
      const double first_s = Seconds(t0, Clock::now());
      SearchOptions exh = opt;
      exh.exhaustive = true;
      const double exh_s = TimeQueries(db.get(), "g", queries, exh, &truth);
      const double s = TimeQueries(db.get(), "g", queries, opt, &got);
      std::printf("%-14s %-22s %9lld %8.3f %10.3f %12.3f %12.3f %9.1f   (first search %.0f ms)\n",
                  factory.c_str(), c.name, (long long)got[0].passing, Recall(got, truth, a.k),
                  s * 1e3, unfiltered_s * 1e3, exh_s * 1e3, exh_s / s, first_s * 1e3);
    }
    db.reset();
    std::filesystem::remove_all(path);
  }
  return 0;
}

// Queries of one kind read from .npy files (PREFIX.mean/.var/.weights or
// PREFIX.vec), with the row sizes of a collection.
struct QuerySet {
  std::string name;
  int64_t n = 0;
  int64_t row = 0, weight_row = 0;  // floats per query: mean/vec, weights
  std::vector<float> mean, var, weights, vec;

  EmbeddingView View(int64_t i) const {
    EmbeddingView v;
    v.n = 1;
    if (!vec.empty()) v.vec = vec.data() + i * row;
    if (!mean.empty()) v.mean = mean.data() + i * row;
    if (!var.empty()) v.var = var.data() + i * row;
    if (!weights.empty()) v.weights = weights.data() + i * weight_row;
    return v;
  }
};

std::vector<float> ReadFloats(const std::string& path, int64_t* rows) {
  hedgedb::NpyArray a;
  Check(hedgedb::ReadNpy(path, &a), "read queries");
  std::vector<float> out;
  Check(hedgedb::NpyToFloat32(a, path, &out), "read queries");
  *rows = a.shape.empty() ? 0 : a.shape[0];
  return out;
}

// `arg` is PREFIX or NAME=PREFIX (NAME heads the set's recall column; the
// default is the file name of PREFIX).
QuerySet LoadQueries(const std::string& arg, const CollectionSpec& spec) {
  QuerySet q;
  const size_t eq = arg.find('=');
  const std::string prefix = eq == std::string::npos ? arg : arg.substr(eq + 1);
  q.name = eq == std::string::npos ? std::filesystem::path(prefix).filename().string()
                                   : arg.substr(0, eq);
  const int C = spec.kind == Kind::kMog ? spec.components : 1;
  q.row = int64_t(C) * spec.dim;
  q.weight_row = C;
  int64_t rows = 0;
  if (spec.kind == Kind::kPoint) {
    q.vec = ReadFloats(prefix + ".vec.npy", &q.n);
  } else if (spec.kind == Kind::kGaussian || spec.kind == Kind::kMog) {
    q.mean = ReadFloats(prefix + ".mean.npy", &q.n);
    q.var = ReadFloats(prefix + ".var.npy", &rows);
    if (spec.kind == Kind::kMog && std::filesystem::exists(prefix + ".weights.npy")) {
      q.weights = ReadFloats(prefix + ".weights.npy", &rows);
    }
  } else {
    std::fprintf(stderr, "curve: kind %s is not supported\n", hedgedb::KindName(spec.kind));
    std::exit(2);
  }
  const size_t size = q.vec.empty() ? q.mean.size() : q.vec.size();
  if (size != size_t(q.n * q.row) || (!q.var.empty() && q.var.size() != size) ||
      (!q.weights.empty() && q.weights.size() != size_t(q.n * q.weight_row))) {
    std::fprintf(stderr, "curve: %s: arrays do not match the collection (%lld floats per query)\n",
                 prefix.c_str(), (long long)q.row);
    std::exit(2);
  }
  return q;
}

// Runs each query of `q` alone; returns mean seconds per query.
double TimeQuerySet(DB* db, const std::string& name, const QuerySet& q, const SearchOptions& opt,
                    std::vector<SearchResult>* all) {
  all->clear();
  auto t0 = Clock::now();
  for (int64_t i = 0; i < q.n; ++i) {
    std::vector<SearchResult> r;
    Check(db->Search(name, q.View(i), opt, &r), "search");
    all->push_back(std::move(r[0]));
  }
  return Seconds(t0, Clock::now()) / double(q.n);
}

// The two-stage curve of an existing collection on real query embeddings.
// Writes `value` to a control file; false if it cannot.
bool WriteControl(const std::string& file, const std::string& value) {
  FILE* f = std::fopen(file.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fputs(value.c_str(), f) >= 0;
  return (std::fclose(f) == 0) && ok;
}

int64_t ReadControl(const std::string& file) {
  long long v = -1;
  FILE* f = std::fopen(file.c_str(), "r");
  if (f) {
    if (std::fscanf(f, "%lld", &v) != 1) v = -1;
    std::fclose(f);
  }
  return v;
}

// A field of a cgroup-v1 memory.stat file ("rss": anonymous memory charged
// to the group, "cache": page cache), in bytes; -1 if absent.
int64_t MemoryStat(const std::string& cgroup, const std::string& field) {
  FILE* f = std::fopen((cgroup + "/memory.stat").c_str(), "r");
  if (!f) return -1;
  char name[64];
  long long v = 0, found = -1;
  while (std::fscanf(f, "%63s %lld", name, &v) == 2) {
    if (field == name) {
      found = v;
      break;
    }
  }
  std::fclose(f);
  return found;
}

// paged: a collection larger than the memory it may use. Builds n Gaussian
// items; a child process opens it and runs the queries with no limit (the
// reference answers, and the anonymous memory the work needs); then, with
// the page cache dropped, a child in a cgroup-v1 memory group limited to
// that plus --cache-mb (default: half the arena's bytes) for the page cache
// opens it and runs the same queries: same answers, open time, ms per query,
// major page faults, the group's peak and what it held at the end.
int RunPaged(const Args& a) {
  const std::string factory = a.factories.size() == 1 ? a.factories[0] : "IVF1024,SQ8";
  const std::string path = a.dir + "/paged";
  const int64_t arena_bytes = a.n * 2 * a.dim * int64_t(sizeof(float));
  const int64_t cache = a.cache_mb > 0 ? a.cache_mb << 20 : arena_bytes / 2;
  std::vector<float> qmean, qvar;
  {
    GaussianData queries = MakeData(a.queries, a.dim, 2, a.classes);
    qmean = std::move(queries.mean);
    qvar = std::move(queries.var);
  }
  // Every engine call runs in a child: this process never starts an OpenMP
  // team, which a forked child could not use.
  const pid_t builder = ::fork();
  if (builder == 0) {
    GaussianData items = MakeData(a.n, a.dim, 1, a.classes);
    auto db = FreshCollection(path, a.dim, factory);
    Ingest(db.get(), "g", items, 100000);
    Check(db->Flush(), "flush");
    db.reset();
    _exit(0);
  }
  int built = 0;
  ::waitpid(builder, &built, 0);
  if (!WIFEXITED(built) || WEXITSTATUS(built) != 0) {
    std::printf("failed: building the collection\n");
    std::filesystem::remove_all(path);
    return 1;
  }
  std::printf("# paged: n=%lld D=%d gaussian, %s, arena %.0f MB, page cache allowed %.0f MB\n",
              (long long)a.n, a.dim, factory.c_str(), arena_bytes / 1e6, cache / 1e6);
  std::fflush(stdout);
  // A child that opens the collection and runs every query one at a time:
  // its answers, seconds to open and per query, and anonymous memory.
  struct Run {
    double open_s = 0, query_s = 0;
    // Charged to the group at the end: anonymous memory, page cache.
    int64_t anon = 0, page_cache = 0;
    long major_faults = 0;
    std::vector<int64_t> ids;
  };
  auto run_child = [&](const std::string& cgroup, Run* run) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      if (!cgroup.empty() && !WriteControl(cgroup + "/cgroup.procs", std::to_string(::getpid()))) {
        _exit(3);
      }
      Run r;
      auto t0 = Clock::now();
      auto db = OpenDb(path);
      CollectionStats st;
      Check(db->GetStats("g", &st), "stats");
      r.open_s = Seconds(t0, Clock::now());
      SearchOptions opt;
      opt.k = a.k;
      t0 = Clock::now();
      for (int q = 0; q < a.queries; ++q) {
        EmbeddingView v;
        v.n = 1;
        v.mean = qmean.data() + size_t(q) * a.dim;
        v.var = qvar.data() + size_t(q) * a.dim;
        std::vector<SearchResult> res;
        Check(db->Search("g", v, opt, &res), "search");
        for (int i = 0; i < a.k; ++i) {
          r.ids.push_back(i < int(res[0].hits.size()) ? res[0].hits[i].id : -1);
        }
      }
      r.query_s = Seconds(t0, Clock::now()) / a.queries;
      r.anon = MemoryStat(cgroup, "rss");
      r.page_cache = MemoryStat(cgroup, "cache");
      struct rusage ru;
      ::getrusage(RUSAGE_SELF, &ru);
      r.major_faults = ru.ru_majflt;
      const double head[4] = {r.open_s, r.query_s, double(r.anon), double(r.page_cache)};
      const long faults = r.major_faults;
      bool ok = ::write(fds[1], head, sizeof(head)) == ssize_t(sizeof(head)) &&
                ::write(fds[1], &faults, sizeof(faults)) == ssize_t(sizeof(faults));
      const size_t bytes = r.ids.size() * sizeof(int64_t);
      ok = ok && ::write(fds[1], r.ids.data(), bytes) == ssize_t(bytes);
      _exit(ok ? 0 : 4);
    }
    ::close(fds[1]);
    double head[4] = {0, 0, 0, 0};
    long faults = 0;
    run->ids.assign(size_t(a.queries) * a.k, -2);
    const size_t bytes = run->ids.size() * sizeof(int64_t);
    bool ok = ::read(fds[0], head, sizeof(head)) == ssize_t(sizeof(head)) &&
              ::read(fds[0], &faults, sizeof(faults)) == ssize_t(sizeof(faults));
    size_t got = 0;
    while (ok && got < bytes) {
      const ssize_t r = ::read(fds[0], reinterpret_cast<char*>(run->ids.data()) + got, bytes - got);
      if (r <= 0) break;
      got += size_t(r);
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) {
      std::printf("the run was killed by signal %d (out of memory?)\n", WTERMSIG(status));
      return false;
    }
    run->open_s = head[0];
    run->query_s = head[1];
    run->anon = int64_t(head[2]);
    run->page_cache = int64_t(head[3]);
    run->major_faults = faults;
    return ok && got == bytes && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  Run reference, limited;
  // Each run in a memory group of its own: the reference without a limit
  // (it measures the anonymous memory the work needs), then the limited one.
  const std::string group = "/sys/fs/cgroup/memory/hedgedb-paged-" + std::to_string(::getpid());
  if (!std::filesystem::create_directory(group + "-a") ||
      !std::filesystem::create_directory(group + "-b")) {
    std::printf("skipped: cannot create cgroup-v1 memory groups (%s-a, -b)\n", group.c_str());
    std::filesystem::remove_all(path);
    return 0;
  }
  const bool ref_ran = run_child(group + "-a", &reference);
  ::rmdir((group + "-a").c_str());
  if (!ref_ran) {
    ::rmdir((group + "-b").c_str());
    std::filesystem::remove_all(path);
    return 1;
  }
  std::printf("no limit: open %.2f s, %.3f ms/query, anonymous memory %.0f MB\n", reference.open_s,
              reference.query_s * 1e3, reference.anon / 1e6);
  const int64_t limit = reference.anon + cache;
  const bool dropped = WriteControl("/proc/sys/vm/drop_caches", "1");  // no process maps it now
  bool ran = WriteControl(group + "-b/memory.limit_in_bytes", std::to_string(limit));
  ran = ran && run_child(group + "-b", &limited);
  const int64_t peak = ReadControl(group + "-b/memory.max_usage_in_bytes");
  const int64_t hits = ReadControl(group + "-b/memory.failcnt");
  ::rmdir((group + "-b").c_str());
  std::filesystem::remove_all(path);
  if (!ran) return 1;
  std::printf(
      "limit %.0f MB (anonymous %.0f + page cache %.0f)%s: open %.2f s, %.3f ms/query (%.1fx "
      "unlimited), answers %s, major faults %ld, group peak %.0f MB, at the end anonymous %.0f MB "
      "and page cache %.0f MB, limit reached %lld times\n",
      limit / 1e6, reference.anon / 1e6, cache / 1e6, dropped ? ", page cache dropped first" : "",
      limited.open_s, limited.query_s * 1e3, limited.query_s / reference.query_s,
      limited.ids == reference.ids ? "identical" : "DIFFERENT", limited.major_faults, peak / 1e6,
      limited.anon / 1e6, limited.page_cache / 1e6, (long long)hits);
  return limited.ids == reference.ids ? 0 : 1;
}

int RunCurve(const Args& a) {
  omp_set_num_threads(1);  // latency on one core
  if (a.db.empty() || a.collection.empty() || a.query_prefixes.empty()) {
    std::fprintf(stderr, "curve: needs --db, --collection and --queries [NAME=]PREFIX[,...]\n");
    return 2;
  }
  auto db = OpenDb(a.db);
  CollectionStats stats;
  Check(db->Flush(), "flush");  // trains the index if ingest left it untrained
  Check(db->GetStats(a.collection, &stats), "stats");
  std::vector<QuerySet> sets;
  int64_t total = 0;
  for (const std::string& prefix : a.query_prefixes) {
    sets.push_back(LoadQueries(prefix, stats.spec));
    total += sets.back().n;
  }
  const std::string& factory = stats.index_description;
  const bool ivf = factory.rfind("IVF", 0) == 0, hnsw = factory.find("HNSW") != std::string::npos;
  std::printf(
      "# curve: collection %s, %s, %lld items, D=%d C=%d, index %s (fitted nprobe %d, efSearch "
      "%d, estimate %.3f), k=%d, score default (samples %d), one query at a time, 1 thread, "
      "uncertainty off, ms/query the fastest of %d rounds\n",
      a.collection.c_str(), hedgedb::KindName(stats.spec.kind), (long long)stats.items,
      stats.spec.dim, stats.spec.components, factory.c_str(), stats.index_nprobe,
      stats.index_ef_search, stats.index_recall_estimate, a.k, stats.spec.samples,
      std::max(a.repeats, 1));
  if (!stats.index_trained) {
    std::printf("# the index is not trained (too few items): every search is exhaustive\n");
  }
  std::printf("# queries:");
  for (const QuerySet& q : sets) std::printf(" %s %lld", q.name.c_str(), (long long)q.n);
  std::printf("\n\n| index | knob | candidates | recall@%d |", a.k);
  for (const QuerySet& q : sets) std::printf(" %s |", q.name.c_str());
  std::printf(" ms/query | exhaustive ms/query | speedup |\n|---|---|---:|---:|");
  for (size_t i = 0; i < sets.size(); ++i) std::printf("---:|");
  std::printf("---:|---:|---:|\n");
  std::fflush(stdout);

  SearchOptions exh;
  exh.k = a.k;
  exh.exhaustive = true;
  exh.with_uncertainty = false;
  std::vector<std::vector<SearchResult>> truth(sets.size());
  double exh_s = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    exh_s += TimeQuerySet(db.get(), a.collection, sets[i], exh, &truth[i]) * double(sets[i].n);
  }
  exh_s /= double(total);

  // The rows: the default settings, then the sweep.
  struct Row {
    SearchOptions opt;
    std::string knob, cands;
    std::vector<double> recalls;  // per query set
    double recall = 0;            // over all queries
    double seconds = -1;          // per query, the fastest round
  };
  std::vector<Row> rows;
  SearchOptions def = exh;
  def.exhaustive = false;
  char text[64];
  const char* knob_name = ivf ? "nprobe" : hnsw ? "efSearch" : "-";
  const int fitted = ivf ? stats.index_nprobe : hnsw ? stats.index_ef_search : 0;
  std::snprintf(text, sizeof(text), "%s=%d", knob_name, fitted);
  rows.push_back({def,
                  fitted ? text : "-",
                  stats.index_candidates > 0
                      ? std::to_string(int64_t(def.k) * stats.index_candidates / 10) + " (fitted)"
                      : std::to_string(def.k * hedgedb::kDefaultOversampling) + " (" +
                            std::to_string(hedgedb::kDefaultOversampling) + " x k)",
                  {},
                  0,
                  -1});
  std::vector<int> knobs = a.knobs;
  if (knobs.empty()) {
    if (ivf) knobs = {8, 16, 32, 64, 128};
    if (hnsw) knobs = {64, 128, 256};
    if (knobs.empty()) knobs = {0};
  }
  std::vector<int64_t> cands = a.candidates;
  if (cands.empty()) cands = {20, 50, 100, 200, 500, 1000};
  for (int knob : knobs) {
    for (int64_t c : cands) {
      SearchOptions opt = def;
      opt.candidates = c;
      if (ivf) opt.nprobe = knob;
      if (hnsw) opt.ef_search = std::max<int>(knob, int(c));
      std::snprintf(text, sizeof(text), "%s=%d", knob_name, ivf ? knob : opt.ef_search);
      rows.push_back({opt, knob ? text : "-", std::to_string(c), {}, 0, -1});
    }
  }
  {
    // Warm-up (untimed): the first pass over the coarse index's lists pays
    // page faults that would otherwise land on the first row.
    std::vector<SearchResult> ignored;
    for (const QuerySet& q : sets) TimeQuerySet(db.get(), a.collection, q, def, &ignored);
  }
  // --repeats rounds over all rows; each row keeps its fastest round. A pass
  // over a few hundred queries takes a fraction of a second, which a busy
  // machine's scheduler skews; rounds spread each row's passes over the run.
  std::vector<SearchResult> got;
  for (int round = 0; round < std::max(a.repeats, 1); ++round) {
    for (Row& r : rows) {
      double s = 0;
      for (size_t i = 0; i < sets.size(); ++i) {
        s += TimeQuerySet(db.get(), a.collection, sets[i], r.opt, &got) * double(sets[i].n);
        if (round == 0) {
          r.recalls.push_back(Recall(got, truth[i], a.k));
          r.recall += r.recalls.back() * double(sets[i].n) / double(total);
        }
      }
      s /= double(total);
      if (r.seconds < 0 || s < r.seconds) r.seconds = s;
    }
  }
  for (const Row& r : rows) {
    const bool is_default = &r == &rows[0];
    const char* b = is_default ? "**" : "";
    std::printf("| %s%s%s%s | %s%s%s | %s%s%s | %s%.3f%s |", b, factory.c_str(),
                is_default ? " (default)" : "", b, b, r.knob.c_str(), b, b, r.cands.c_str(), b, b,
                r.recall, b);
    for (double x : r.recalls) std::printf(" %.3f |", x);
    std::printf(" %.2f | %.1f | %.0fx |\n", r.seconds * 1e3, exh_s * 1e3, exh_s / r.seconds);
  }
  return 0;
}

}  // namespace

static void PrintUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: driver_engine search|ingest|reopen|remove|filter|throughput|paged [--n N] [--dim "
      "D] "
      "[--queries Q]\n"
      "       [--k K] [--classes C (0: unclustered)] [--dir DIR] [--factories F1;F2;...]\n"
      "       [--kind point|gaussian|mog|codes (throughput)] [--cache-mb MB (paged)]\n"
      "       [--sync 0|1 (ingest; default both)]\n"
      "       driver_engine curve --db DB --collection NAME --queries [NAME=]PREFIX[,...]\n"
      "       [--k K] [--knobs N1,N2,... (nprobe or efSearch)] [--candidates C1,C2,...]\n"
      "       [--repeats R (timed rounds over all rows, each row's fastest reported; default "
      "5)]\n");
}

static bool IsMode(const std::string& mode) {
  for (const char* m :
       {"search", "ingest", "reopen", "remove", "filter", "throughput", "curve", "paged"}) {
    if (mode == m) return true;
  }
  return false;
}

int main(int argc, char** argv) {
  Args a;
  // --help anywhere prints the usage and runs nothing (a benchmark takes minutes).
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      PrintUsage(stdout);
      return 0;
    }
  }
  if (argc < 2 || !IsMode(argv[1])) {
    if (argc >= 2) std::fprintf(stderr, "unknown mode %s\n", argv[1]);
    PrintUsage(stderr);
    return 2;
  }
  if ((argc - 2) % 2 != 0) {
    std::fprintf(stderr, "flag %s needs a value\n", argv[argc - 1]);
    return 2;
  }
  a.mode = argv[1];
  a.dir = std::filesystem::temp_directory_path() / "hedgedb-bench";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string f = argv[i], v = argv[i + 1];
    if (f == "--n")
      a.n = std::stoll(v);
    else if (f == "--dim")
      a.dim = std::stoi(v);
    else if (f == "--queries" && a.mode == "curve")
      a.query_prefixes = SplitList(v, ',');
    else if (f == "--queries")
      a.queries = std::stoi(v);
    else if (f == "--cache-mb")
      a.cache_mb = std::atoll(v.c_str());
    else if (f == "--repeats")
      a.repeats = std::stoi(v);
    else if (f == "--db")
      a.db = v;
    else if (f == "--collection")
      a.collection = v;
    else if (f == "--knobs")
      for (const std::string& x : SplitList(v, ',')) a.knobs.push_back(std::stoi(x));
    else if (f == "--candidates")
      for (const std::string& x : SplitList(v, ',')) a.candidates.push_back(std::stoll(x));
    else if (f == "--k")
      a.k = std::stoi(v);
    else if (f == "--classes")
      a.classes = std::stoi(v);
    else if (f == "--dir")
      a.dir = v;
    else if (f == "--kind")
      a.kind = v;
    else if (f == "--sync")
      a.sync = std::stoi(v);
    else if (f == "--factories") {
      a.factories = SplitList(v, ';');
    } else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  std::filesystem::create_directories(a.dir);
  if (a.mode == "search") return RunSearch(a);
  if (a.mode == "ingest") return RunIngest(a);
  if (a.mode == "remove") return RunRemove(a);
  if (a.mode == "reopen") return RunReopen(a);
  if (a.mode == "filter") return RunFilter(a);
  if (a.mode == "throughput") return RunThroughput(a);
  if (a.mode == "curve") return RunCurve(a);
  return RunPaged(a);  // IsMode: the last one left
}
