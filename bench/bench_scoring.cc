// Stage-2 scoring kernels: Monte Carlo match probability (scalar reference
// loop vs the SIMD kernel per ISA), the closed-form scores mls and csd (the
// same), and the DIMCO scan (every scan kernel vs
// the blocked one, the exact top-k with its pre-scan, FAISS IndexPQ with
// identity codebooks), and the nearest-centroid assignment of IVF lists.
// items_per_second = candidates scored (rows assigned) per second.
//
//   OMP_NUM_THREADS=1 taskset -c 0 bin/bench_scoring --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <faiss/IndexPQ.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "index/nearest_centroid.h"
#include "query/code_scan.h"
#include "query/code_topk.h"
#include "query/kernels.h"
#include "query/scalar_reference.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {
namespace {

constexpr int kSamples = 8;
constexpr int kDim = 64;
constexpr size_t kArenaRows = 20000;
constexpr size_t kCandidates = 1024;

// An arena of random gaussian/mog rows, a query, and candidate rows in random
// order (stage-2 candidates are scattered over the arena).
struct McFixture {
  RowShape shape;
  ScoreParams params;
  std::vector<float> arena;
  std::vector<float> query;
  std::vector<int64_t> candidates;

  explicit McFixture(int components) {
    shape.kind = components > 1 ? Kind::kMog : Kind::kGaussian;
    shape.dim = kDim;
    shape.components = components;
    params.samples = kSamples;
    params.match_a = 0.5f;
    params.match_b = 2.0f;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> variance(0.05f, 0.5f);
    const size_t row_size = shape.item_row_size();
    auto fill = [&](float* row) {
      for (int c = 0; c < (components > 1 ? components : 0); ++c) row[c] = 1.0f / components;
      const int offset = components > 1 ? components : 0;
      for (int i = 0; i < components * kDim; ++i) {
        row[offset + i] = normal(rng);
        row[offset + components * kDim + i] = variance(rng);
      }
    };
    arena.resize(kArenaRows * row_size);
    for (size_t r = 0; r < kArenaRows; ++r) fill(arena.data() + r * row_size);
    query.resize(row_size);
    fill(query.data());
    std::uniform_int_distribution<int64_t> pick(0, kArenaRows - 1);
    for (size_t i = 0; i < kCandidates; ++i) candidates.push_back(pick(rng));
  }
};

const McFixture& Gaussian() {
  static const McFixture fixture(1);
  return fixture;
}
const McFixture& Mog() {
  static const McFixture fixture(2);
  return fixture;
}

// Arithmetic of the kernel per candidate: Gram 2K^2 D, plus the item samples
// y = (mu - centre) + sd * eps and ||y||^2 (4 flops per item sample and
// dimension). Sigmoid, sqrt and exp are not counted.
double McFlopsPerCandidate() { return 2.0 * kSamples * kSamples * kDim + 4.0 * kSamples * kDim; }

void SetMcCounters(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kCandidates);
  state.counters["GFLOP/s"] = benchmark::Counter(McFlopsPerCandidate() * kCandidates * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void RunScalar(benchmark::State& state, const McFixture& f) {
  const ScalarMcReference reference(f.shape, f.params, f.query.data());
  const size_t row_size = f.shape.item_row_size();
  std::vector<float> out(kCandidates);
  for (auto _ : state) {
    for (size_t i = 0; i < kCandidates; ++i) {
      out[i] = reference.Score(f.arena.data() + f.candidates[i] * row_size);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetMcCounters(state);
}

// Scores the fixture's candidates through PrepareQuery's ScoreRows with
// `params` at the ISA of argument `isa_arg`, labelled `label` and the ISA;
// false (the benchmark skipped) where the ISA or the params do not work here.
bool RunPrepared(benchmark::State& state, const McFixture& f, const ScoreParams& params,
                 int isa_arg, const std::string& label) {
  const KernelIsa isa = static_cast<KernelIsa>(state.range(isa_arg));
  const KernelIsa saved = ActiveKernelIsa();
  if (!SetKernelIsa(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return false;
  }
  state.SetLabel(label + KernelIsaName(isa));
  std::unique_ptr<PreparedQuery> prepared;
  if (!PrepareQuery(f.shape, params, f.query.data(), &prepared).ok()) {
    SetKernelIsa(saved);
    state.SkipWithError("PrepareQuery failed");
    return false;
  }
  std::vector<float> out(kCandidates);
  for (auto _ : state) {
    prepared->ScoreRows(f.arena.data(), f.shape.item_row_size() * sizeof(float),
                        f.candidates.data(), kCandidates, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetKernelIsa(saved);
  return true;
}

void RunKernel(benchmark::State& state, const McFixture& f) {
  if (RunPrepared(state, f, f.params, 0, "")) SetMcCounters(state);
}

void BM_McGaussianScalar(benchmark::State& state) { RunScalar(state, Gaussian()); }
void BM_McGaussianKernel(benchmark::State& state) { RunKernel(state, Gaussian()); }
void BM_McMog2Scalar(benchmark::State& state) { RunScalar(state, Mog()); }
void BM_McMog2Kernel(benchmark::State& state) { RunKernel(state, Mog()); }

void IsaArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("isa");
  for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    b->Arg(static_cast<int>(isa));
  }
}

BENCHMARK(BM_McGaussianScalar);
BENCHMARK(BM_McGaussianKernel)->Apply(IsaArgs);
BENCHMARK(BM_McMog2Scalar);
BENCHMARK(BM_McMog2Kernel)->Apply(IsaArgs);

// The closed-form scores over the same 1,024 scattered candidates: the
// scalar double reference (ScalarMomentScoreRows: a std::log per dimension
// for mls) and the float32 kernel per ISA through PrepareQuery (the search
// path). Arg score: mls or csd. items_per_second = candidates scored.
void ScoreArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("score");
  for (ScoreType score : {ScoreType::kMls, ScoreType::kCsd}) b->Arg(static_cast<int>(score));
}
void ScoreIsaArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"score", "isa"});
  for (ScoreType score : {ScoreType::kMls, ScoreType::kCsd}) {
    for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
      b->Args({static_cast<int>(score), static_cast<int>(isa)});
    }
  }
}

void RunClosedFormScalar(benchmark::State& state, const McFixture& f) {
  ScoreParams params = f.params;
  params.score = static_cast<ScoreType>(state.range(0));
  state.SetLabel(ScoreName(params.score));
  std::vector<float> out(kCandidates);
  for (auto _ : state) {
    if (!ScalarMomentScoreRows(f.shape, params, f.query.data(), f.arena.data(),
                               f.shape.item_row_size() * sizeof(float), f.candidates.data(),
                               kCandidates, out.data())
             .ok()) {
      state.SkipWithError("ScalarMomentScoreRows failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kCandidates);
}

void RunClosedFormKernel(benchmark::State& state, const McFixture& f) {
  ScoreParams params = f.params;
  params.score = static_cast<ScoreType>(state.range(0));
  if (RunPrepared(state, f, params, 1, std::string(ScoreName(params.score)) + " ")) {
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kCandidates);
  }
}

void BM_ClosedFormGaussianScalar(benchmark::State& state) {
  RunClosedFormScalar(state, Gaussian());
}
void BM_ClosedFormGaussianKernel(benchmark::State& state) {
  RunClosedFormKernel(state, Gaussian());
}
void BM_ClosedFormMog2Scalar(benchmark::State& state) { RunClosedFormScalar(state, Mog()); }
void BM_ClosedFormMog2Kernel(benchmark::State& state) { RunClosedFormKernel(state, Mog()); }
BENCHMARK(BM_ClosedFormGaussianScalar)->Apply(ScoreArgs);
BENCHMARK(BM_ClosedFormGaussianKernel)->Apply(ScoreIsaArgs);
BENCHMARK(BM_ClosedFormMog2Scalar)->Apply(ScoreArgs);
BENCHMARK(BM_ClosedFormMog2Kernel)->Apply(ScoreIsaArgs);

// eta (HIB eq. 9) of single rows, as the collection computes it for every
// hit and the query: two sample sets of the row against each other.
void RunUncertainty(benchmark::State& state, const McFixture& f) {
  const size_t row_size = f.shape.item_row_size();
  size_t next = 0;
  for (auto _ : state) {
    const float* row = f.arena.data() + f.candidates[next] * row_size;
    benchmark::DoNotOptimize(Uncertainty(f.shape, f.params, row));
    next = (next + 1) % kCandidates;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
// The same for the 10 hits of a query in one UncertaintyRows call.
void RunUncertaintyRows(benchmark::State& state, const McFixture& f) {
  constexpr size_t kHits = 10;
  std::vector<float> out(kHits);
  size_t next = 0;
  for (auto _ : state) {
    UncertaintyRows(f.shape, f.params, f.arena.data(), f.shape.item_row_size() * sizeof(float),
                    f.candidates.data() + next, kHits, out.data());
    benchmark::DoNotOptimize(out.data());
    next = (next + kHits) % (kCandidates - kHits);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kHits);
}
void BM_UncertaintyGaussian(benchmark::State& state) { RunUncertainty(state, Gaussian()); }
void BM_UncertaintyMog2(benchmark::State& state) { RunUncertainty(state, Mog()); }
void BM_UncertaintyRows10Gaussian(benchmark::State& state) {
  RunUncertaintyRows(state, Gaussian());
}
void BM_UncertaintyRows10Mog2(benchmark::State& state) { RunUncertaintyRows(state, Mog()); }
BENCHMARK(BM_UncertaintyGaussian);
BENCHMARK(BM_UncertaintyMog2);
BENCHMARK(BM_UncertaintyRows10Gaussian);
BENCHMARK(BM_UncertaintyRows10Mog2);

// ---------------------------------------------------------------------------
// DIMCO: k = d = 256 over the 5,924 items of the CUB test split.
constexpr int kCodeDim = 256;
constexpr int kCodeK = 256;
constexpr size_t kCodeItems = 5924;

struct CodesFixture {
  int d, k;
  std::vector<float> table;    // d x k log-probabilities
  std::vector<uint8_t> codes;  // n x d
  std::vector<int64_t> rows;   // 0..n-1

  CodesFixture(int dim, int symbols, size_t items) : d(dim), k(symbols) {
    std::mt19937_64 rng(2);
    std::normal_distribution<float> logits(0.0f, 2.0f);
    table.resize(static_cast<size_t>(d) * k);
    for (int i = 0; i < d; ++i) {
      double norm = 0;
      for (int j = 0; j < k; ++j) norm += std::exp(table[i * k + j] = logits(rng));
      for (int j = 0; j < k; ++j) table[i * k + j] -= static_cast<float>(std::log(norm));
    }
    std::uniform_int_distribution<int> symbol(0, k - 1);
    codes.resize(items * d);
    for (auto& c : codes) c = static_cast<uint8_t>(symbol(rng));
    for (size_t r = 0; r < items; ++r) rows.push_back(static_cast<int64_t>(r));
  }
};

const CodesFixture& Codes() {
  static const CodesFixture fixture(kCodeDim, kCodeK, kCodeItems);
  return fixture;
}

void SetScanCounters(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kCodeItems);
}

void BM_CodesScanScalar(benchmark::State& state) {
  const CodesFixture& f = Codes();
  std::vector<float> out(kCodeItems);
  for (auto _ : state) {
    for (size_t r = 0; r < kCodeItems; ++r) {
      out[r] = ScalarCodeScore(f.table.data(), kCodeDim, kCodeK, f.codes.data() + r * kCodeDim);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetScanCounters(state);
}

// One query over every item: ScoreRows, with PrepareQuery (validates and
// copies the 256 KiB table) inside the timed loop when prepare:1.
void BM_CodesScan(benchmark::State& state) {
  const CodesFixture& f = Codes();
  const bool prepare_each_query = state.range(0) != 0;
  RowShape shape;
  shape.kind = Kind::kCodes;
  shape.dim = kCodeDim;
  shape.code_k = kCodeK;
  ScoreParams params;
  std::unique_ptr<PreparedQuery> prepared;
  if (!PrepareQuery(shape, params, f.table.data(), &prepared).ok()) {
    state.SkipWithError("PrepareQuery failed");
    return;
  }
  std::vector<float> out(kCodeItems);
  for (auto _ : state) {
    if (prepare_each_query) {
      if (!PrepareQuery(shape, params, f.table.data(), &prepared).ok()) {
        state.SkipWithError("PrepareQuery failed");
        break;
      }
    }
    prepared->ScoreRows(f.codes.data(), kCodeDim, f.rows.data(), kCodeItems, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetScanCounters(state);
}
BENCHMARK(BM_CodesScanScalar)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CodesScan)->ArgName("prepare")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Every DIMCO scan kernel this CPU runs (code_scan.h), arg = kernel index.
// Each iteration scans with the kernel (the timed part) and then with the
// blocked kernel shipped before selection existed, so "vs_blocked" (blocked
// time / kernel time) compares the two under the same host load. The label
// marks the kernel the start-up trial picks on this CPU.
template <const CodesFixture& (*Fixture)()>
void RunCodeScanKernel(benchmark::State& state) {
  const CodesFixture& f = Fixture();
  const CodeScanKernel kernel = static_cast<CodeScanKernel>(state.range(0));
  if (!CodeScanKernelSupported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const size_t n = f.rows.size();
  std::vector<float> out(n), baseline(n);
  double kernel_seconds = 0, baseline_seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    CodeScanRowsWith(kernel, f.table.data(), f.d, f.k, f.codes.data(), f.d, f.rows.data(), n,
                     out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    const auto t1 = std::chrono::steady_clock::now();
    CodeScanRowsWith(CodeScanKernel::kBlocked, f.table.data(), f.d, f.k, f.codes.data(), f.d,
                     f.rows.data(), n, baseline.data());
    benchmark::DoNotOptimize(baseline.data());
    benchmark::ClobberMemory();
    const auto t2 = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(seconds);
    kernel_seconds += seconds;
    baseline_seconds += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["vs_blocked"] = baseline_seconds / kernel_seconds;
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
  state.SetLabel(std::string(CodeScanKernelName(kernel)) +
                 (kernel == MeasuredCodeScanKernel() ? " (chosen)" : ""));
}

void KernelArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("kernel")->DenseRange(0, kCodeScanKernelCount - 1)->UseManualTime();
  b->Unit(benchmark::kMicrosecond);
}

void BM_CodesScanKernel(benchmark::State& state) { RunCodeScanKernel<Codes>(state); }
BENCHMARK(BM_CodesScanKernel)->Apply(KernelArgs);

// DIMCO at scale: 1M items, k = 16, d = 64 (64 MB of codes, a 4 KiB table).
const CodesFixture& Codes1M() {
  static const CodesFixture fixture(64, 16, 1000000);
  return fixture;
}
void BM_CodesScan1MKernel(benchmark::State& state) { RunCodeScanKernel<Codes1M>(state); }
BENCHMARK(BM_CodesScan1MKernel)->Apply(KernelArgs);

// Exact top-10 of the 1M items through CodeTopK (quantized pre-scan, then
// exact scores of the survivors) with the kernel the trial picks; compare
// with BM_CodesScan1MKernel (the full exact scan alone).
// ids:0 passes no row ids (rows 0..n-1), as the searcher does when every row
// is live: the 64 MB of codes alone, as BM_CodesRead1MFloor reads.
void BM_CodesTopK1M(benchmark::State& state) {
  const CodesFixture& f = Codes1M();
  const int64_t* rows = state.range(0) != 0 ? f.rows.data() : nullptr;
  std::vector<CodeHit> hits;
  CodeTopKStats stats;
  for (auto _ : state) {
    CodeTopK(f.table.data(), f.d, f.k, f.codes.data(), f.d, rows, f.rows.size(), 10, &hits, &stats);
    benchmark::DoNotOptimize(hits.data());
  }
  state.counters["prescan"] = stats.prescan;
  state.counters["rescored"] = static_cast<double>(stats.rescored);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.rows.size()));
}
BENCHMARK(BM_CodesTopK1M)->ArgName("ids")->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

// The same top-10 over the first 16,384 items only (1 MiB of codes and 128
// KiB of row ids, which stay in L2 across iterations): the top-k's rate when
// memory is not the limit, to compare with BM_CodesRead1MFloor's bytes/s.
void BM_CodesTopKInCache(benchmark::State& state) {
  const CodesFixture& f = Codes1M();
  constexpr size_t kItems = 16384;
  std::vector<CodeHit> hits;
  for (auto _ : state) {
    CodeTopK(f.table.data(), f.d, f.k, f.codes.data(), f.d, f.rows.data(), kItems, 10, &hits);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(kItems * f.d));
}
BENCHMARK(BM_CodesTopKInCache)->Unit(benchmark::kMicrosecond);

// The bandwidth floor of BM_CodesTopK1M on this machine: the same 64 MB of
// codes read once, in order, with the cheapest SIMD reduction (a byte sum by
// vpsadbw, four independent accumulators; AVX-512 BW where the CPU has it,
// else what the compiler makes of the portable loop). Anything the top-k
// does beyond that is arithmetic, selection or extra bytes (the 8 MB of row
// ids it is given).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw"))) uint64_t SumBytesAvx512(const uint8_t* p, size_t n) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  const __m512i zero = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm512_add_epi64(acc[j], _mm512_sad_epu8(_mm512_loadu_si512(p + i + 64 * j), zero));
    }
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(
      lanes, _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3])));
  uint64_t total = 0;
  for (uint64_t v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}
#endif

uint64_t SumBytes(const uint8_t* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (avx512) return SumBytesAvx512(p, n);
#endif
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += p[i];
  return total;
}

void BM_CodesRead1MFloor(benchmark::State& state) {
  const CodesFixture& f = Codes1M();
  uint64_t sum = 0;
  for (auto _ : state) {
    sum += SumBytes(f.codes.data(), f.codes.size());
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.codes.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.rows.size()));
}
BENCHMARK(BM_CodesRead1MFloor)->Unit(benchmark::kMicrosecond);

// FAISS IndexPQ, M = d sub-quantizers of dimension k, identity codebooks,
// inner product; the query vector is the flattened table. search() builds the
// d x k inner-product table from the codebooks (d * k * k multiply-adds), then
// scans. Arg: number of results.
void BM_FaissIndexPQ(benchmark::State& state) {
  const CodesFixture& f = Codes();
  faiss::IndexPQ index(kCodeDim * kCodeK, kCodeDim, 8, faiss::METRIC_INNER_PRODUCT);
  index.pq.centroids.assign(static_cast<size_t>(kCodeDim) * kCodeK * kCodeK, 0.0f);
  for (int m = 0; m < kCodeDim; ++m) {
    for (int j = 0; j < kCodeK; ++j) {
      index.pq.centroids[(static_cast<size_t>(m) * kCodeK + j) * kCodeK + j] = 1.0f;
    }
  }
  index.is_trained = true;
  // 8-bit codes are the symbols byte for byte.
  index.codes = f.codes;
  index.ntotal = static_cast<faiss::Index::idx_t>(kCodeItems);
  const int k = static_cast<int>(state.range(0));
  std::vector<float> distances(k);
  std::vector<faiss::Index::idx_t> labels(k);
  for (auto _ : state) {
    index.search(1, f.table.data(), k, distances.data(), labels.data());
    benchmark::DoNotOptimize(distances.data());
  }
  SetScanCounters(state);
}
BENCHMARK(BM_FaissIndexPQ)->ArgName("topk")->Arg(10)->Unit(benchmark::kMicrosecond);

// IVF list assignment (index/nearest_centroid.h) at the process's SIMD level:
// 10,000 rows against 1,024 centroids, D = 32; the BLAS product and the row
// minimum (the per-ISA part) each take a share.
void BM_NearestCentroids(benchmark::State& state) {
  constexpr int64_t kRows = 10000, kCentroids = 1024;
  constexpr int kCentroidDim = 32;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kRows) * kCentroidDim);
  std::vector<float> centroids(static_cast<size_t>(kCentroids) * kCentroidDim);
  for (float& v : x) v = normal(rng);
  for (float& v : centroids) v = normal(rng);
  std::vector<int64_t> labels(kRows);
  std::vector<float> distances(kRows);
  for (auto _ : state) {
    index::NearestCentroids(x.data(), kRows, centroids.data(), kCentroids, kCentroidDim,
                            labels.data(), distances.data());
    benchmark::DoNotOptimize(labels.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRows);
}
BENCHMARK(BM_NearestCentroids)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace query
}  // namespace hedgedb

BENCHMARK_MAIN();
