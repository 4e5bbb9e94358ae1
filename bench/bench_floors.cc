// How far each hot path is from what this machine can do at best, measured
// in one process: the floors (the core's FP32 FMA peak, one core's read
// bandwidth), then each path with its distance to its floor as a counter
// ("x_floor": measured time over the floor's time, 1 = at the floor).
//
//   OMP_NUM_THREADS=1 taskset -c 0 bin/bench_floors --benchmark_repetitions=3
//
// The floors (measured once per process, best of 7 runs):
//   FMA peak:   16 independent chains of vector FMAs at the widest level the
//               CPU runs (AVX-512F, else AVX2+FMA), 2 flops per lane.
//   bandwidth:  a 256 MB float array summed in order with vector loads
//               (four accumulators), far larger than the caches.
// The paths (one thread):
//   mc:          Monte Carlo scores (K = 8, D = 64) of 100 queries over the
//                same 100,000 rows (an exhaustive batch: McScoreRowsShared);
//                floor = the counted FMAs of the Gram and the item samples
//                at the FMA peak (the sqrt, exp and reciprocal of each of the
//                64 sample pairs are extra work the floor leaves out).
//   mls:         the mls sums of one query over 100,000 rows in order
//                (an exhaustive search); floor = their 51 MB read once.
//   stage 1:     hedgedb's IVF list scan (index/list_scan.h) of one query
//                over 1,000,000 clustered vectors (D = 65, the coarse vectors
//                of gaussian collections), IVF1024, nprobe 16; floor = the
//                centroids and the probed lists' bytes read once. FAISS's own
//                search of the same index beside it. The same with SQ8 lists
//                (IVF1024,SQ8: residual codes, a byte per dimension).
#include <benchmark/benchmark.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexScalarQuantizer.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "index/list_scan.h"
#include "query/kernels.h"
#include "query/scorer.h"

// GCC 12's _mm512_reduce_add_ps reads a register it leaves undefined on
// purpose (avx512fintrin.h): not a bug here.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hedgedb {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --------------------------------------------------------------------------
// Floors.
constexpr int64_t kPeakIterations = 20000000;

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) float FmaChains512(int64_t iterations) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float FmaChains256(int64_t iterations) {
  __m256 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
#endif

// FP32 flops per second at the FMA peak (2 per lane per FMA).
double FmaPeak() {
  static const double peak = [] {
    double best = 0;
    for (int run = 0; run < 7; ++run) {
      const double start = Seconds();
      float sink = 0;
      int lanes = 1;
#if defined(__x86_64__) && defined(__GNUC__)
      if (__builtin_cpu_supports("avx512f")) {
        sink = FmaChains512(kPeakIterations / 10);
        lanes = 16;
      } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        sink = FmaChains256(kPeakIterations / 10);
        lanes = 8;
      }
#endif
      benchmark::DoNotOptimize(sink);
      const double flops = 2.0 * 16 * lanes * double(kPeakIterations / 10);
      best = std::max(best, flops / (Seconds() - start));
    }
    return best;
  }();
  return peak;
}

constexpr size_t kBandwidthFloats = size_t(64) << 20;  // 256 MB

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) float SumFloats512(const float* p, size_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int j = 0; j < 4; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(p + i + 16 * j));
  }
  float total = _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) total += p[i];
  return total;
}

__attribute__((target("avx2"))) float SumFloats256(const float* p, size_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(p + i + 8 * j));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes,
                  _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}
#endif

// Sums n floats with vector loads (four independent accumulators).
float SumFloats(const float* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return SumFloats512(p, n);
  if (__builtin_cpu_supports("avx2")) return SumFloats256(p, n);
#endif
  float s[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) s[i % 4] += p[i];
  return s[0] + s[1] + s[2] + s[3];
}

// Bytes per second one core reads from memory.
double ReadBandwidth() {
  static const double bandwidth = [] {
    std::vector<float> data(kBandwidthFloats, 1.0f);
    double best = 0;
    for (int run = 0; run < 7; ++run) {
      const double start = Seconds();
      float sink = SumFloats(data.data(), data.size());
      benchmark::DoNotOptimize(sink);
      best = std::max(best, double(data.size() * sizeof(float)) / (Seconds() - start));
    }
    return best;
  }();
  return bandwidth;
}

void BM_FloorFmaPeak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(FmaPeak());
  state.counters["GFLOP/s"] = FmaPeak() * 1e-9;
}
BENCHMARK(BM_FloorFmaPeak)->Iterations(1);

void BM_FloorReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadBandwidth());
  state.counters["GB/s"] = ReadBandwidth() * 1e-9;
}
BENCHMARK(BM_FloorReadBandwidth)->Iterations(1);

// Sets x_floor = (measured seconds per iteration) / floor_seconds.
void SetFloorRatio(benchmark::State& state, double seconds, double floor_seconds) {
  state.counters["x_floor"] = seconds / double(state.iterations()) / floor_seconds;
}

// --------------------------------------------------------------------------
// Scoring: gaussian rows D = 64, K = 8.
constexpr int kDim = 64;
constexpr int kSamples = 8;
constexpr size_t kRows = 100000;

struct Rows {
  RowShape shape{Kind::kGaussian, kDim, 1, 0};
  std::vector<float> arena;
  std::vector<int64_t> all;
  std::vector<std::vector<float>> queries;
  Rows() {
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> variance(0.02f, 0.2f);
    arena.resize(kRows * 2 * kDim);
    for (size_t r = 0; r < kRows; ++r) {
      for (int d = 0; d < kDim; ++d) {
        arena[r * 2 * kDim + d] = normal(rng);
        arena[r * 2 * kDim + kDim + d] = variance(rng);
      }
      all.push_back(int64_t(r));
    }
    for (int q = 0; q < 100; ++q) {
      std::vector<float> row(2 * kDim);
      for (int d = 0; d < kDim; ++d) {
        row[d] = normal(rng);
        row[kDim + d] = variance(rng);
      }
      queries.push_back(row);
    }
  }
};

const Rows& TheRows() {
  static const Rows rows;
  return rows;
}

std::vector<std::unique_ptr<query::PreparedQuery>> Prepare(ScoreType score, size_t nq) {
  const Rows& f = TheRows();
  query::ScoreParams params;
  params.score = score;
  params.samples = kSamples;
  std::vector<std::unique_ptr<query::PreparedQuery>> out(nq);
  for (size_t q = 0; q < nq; ++q) {
    if (!query::PrepareQuery(f.shape, params, f.queries[q].data(), &out[q]).ok()) std::abort();
  }
  return out;
}

void BM_McExhaustiveBatch100(benchmark::State& state) {
  const Rows& f = TheRows();
  const auto prepared = Prepare(ScoreType::kMc, 100);
  std::vector<const query::PreparedQuery*> queries;
  for (const auto& p : prepared) queries.push_back(p.get());
  std::vector<float> out(queries.size() * kRows);
  const double start = Seconds();
  for (auto _ : state) {
    query::ScoreRowsShared(queries.data(), queries.size(), f.arena.data(), 2 * kDim * sizeof(float),
                           f.all.data(), kRows, out.data(), kRows);
    benchmark::DoNotOptimize(out.data());
  }
  const double seconds = Seconds() - start;
  // Gram 2 K^2 D and the item samples and their norms 4 K D per candidate.
  const double flops = (2.0 * kSamples * kSamples * kDim + 4.0 * kSamples * kDim) * 100 * kRows;
  state.SetItemsProcessed(int64_t(state.iterations()) * 100 * int64_t(kRows));
  SetFloorRatio(state, seconds, flops / FmaPeak());
}
BENCHMARK(BM_McExhaustiveBatch100)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_MlsExhaustiveOneQuery(benchmark::State& state) {
  const Rows& f = TheRows();
  const auto prepared = Prepare(ScoreType::kMls, 1);
  std::vector<float> out(kRows);
  const double start = Seconds();
  for (auto _ : state) {
    prepared[0]->ScoreRows(f.arena.data(), 2 * kDim * sizeof(float), f.all.data(), kRows,
                           out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double seconds = Seconds() - start;
  const double bytes = double(kRows) * 2 * kDim * sizeof(float);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  SetFloorRatio(state, seconds, bytes / ReadBandwidth());
}
BENCHMARK(BM_MlsExhaustiveOneQuery)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// --------------------------------------------------------------------------
// Stage 1: IVF1024 over 1,000,000 clustered vectors, D = 65.
constexpr int kCoarseDim = 65;
constexpr int64_t kVectors = 1000000;
constexpr int kLists = 1024;

struct Ivf {
  faiss::IndexFlatL2 quantizer{kCoarseDim};
  std::unique_ptr<faiss::IndexIVF> ivf;
  std::vector<float> queries;
  index::CentroidCache cache;
  size_t code_bytes = kCoarseDim * sizeof(float);
  explicit Ivf(bool sq8, int64_t kVectors = hedgedb::kVectors) {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> centres(size_t(1000) * kCoarseDim), x(size_t(kVectors) * kCoarseDim);
    for (float& v : centres) v = 3.0f * normal(rng);
    std::uniform_int_distribution<int> pick(0, 999);
    for (int64_t i = 0; i < kVectors; ++i) {
      const int c = pick(rng);
      for (int d = 0; d < kCoarseDim; ++d) {
        x[size_t(i) * kCoarseDim + d] = centres[size_t(c) * kCoarseDim + d] + 0.3f * normal(rng);
      }
    }
    if (sq8) {
      ivf = std::make_unique<faiss::IndexIVFScalarQuantizer>(&quantizer, kCoarseDim, kLists,
                                                             faiss::ScalarQuantizer::QT_8bit);
      code_bytes = kCoarseDim;
    } else {
      ivf = std::make_unique<faiss::IndexIVFFlat>(&quantizer, kCoarseDim, kLists);
    }
    ivf->train(std::min<int64_t>(50000, kVectors), x.data());
    ivf->add(kVectors, x.data());
    for (int q = 0; q < 200; ++q) {
      const int c = pick(rng);
      for (int d = 0; d < kCoarseDim; ++d) {
        queries.push_back(centres[size_t(c) * kCoarseDim + d] + 0.3f * normal(rng));
      }
    }
  }
  // Bytes a query reads: the centroids and its probed lists' vectors and ids.
  double BytesOf(const float* q, int nprobe) const {
    std::vector<float> d(static_cast<size_t>(nprobe));
    std::vector<faiss::Index::idx_t> lists(static_cast<size_t>(nprobe));
    quantizer.search(1, q, nprobe, d.data(), lists.data());
    double bytes = double(kLists) * kCoarseDim * sizeof(float);
    for (faiss::Index::idx_t l : lists) {
      bytes += double(ivf->invlists->list_size(size_t(l))) * double(code_bytes + 8);
    }
    return bytes;
  }
};

Ivf& TheIvf(bool sq8) {
  static Ivf flat(false);
  if (!sq8) return flat;
  static Ivf codes(true);
  return codes;
}

void RunStage1(benchmark::State& state, bool faiss_search, bool sq8) {
  Ivf& f = TheIvf(sq8);
  const int nprobe = int(state.range(0));
  const int64_t k = 200;
  std::vector<float> distances(static_cast<size_t>(k));
  std::vector<int64_t> labels(static_cast<size_t>(k));
  std::vector<faiss::Index::idx_t> faiss_labels(static_cast<size_t>(k));
  double floor_seconds = 0;
  for (int q = 0; q < 200; ++q) {
    floor_seconds += f.BytesOf(f.queries.data() + q * kCoarseDim, nprobe) / ReadBandwidth();
  }
  floor_seconds /= 200;
  f.ivf->nprobe = size_t(nprobe);
  const auto centroids = f.cache.For(f.quantizer);
  int q = 0;
  const double start = Seconds();
  for (auto _ : state) {
    const float* x = f.queries.data() + q * kCoarseDim;
    if (faiss_search) {
      f.ivf->search(1, x, k, distances.data(), faiss_labels.data());
    } else {
      index::ListScanSearch(f.ivf.get(), nullptr, x, 1, k, nprobe, nullptr, distances.data(),
                            labels.data(), centroids.get());
    }
    benchmark::DoNotOptimize(distances.data());
    q = (q + 1) % 200;
  }
  SetFloorRatio(state, Seconds() - start, floor_seconds);
}

// Batches of 100 queries over 100,000 vectors (IVF1024, nprobe 2, k 50: the
// stage 1 of the practitioner comparison's mls search at recall 0.99), per
// query; floor as above.
void BM_Stage1ListScan100kBatch100(benchmark::State& state) {
  static Ivf f(false, 100000);
  const int nprobe = 2;
  const int64_t k = 50, nq = 100;
  std::vector<float> distances(static_cast<size_t>(nq * k));
  std::vector<int64_t> labels(static_cast<size_t>(nq * k));
  double floor_seconds = 0;
  for (int q = 0; q < 200; ++q) {
    floor_seconds += f.BytesOf(f.queries.data() + q * kCoarseDim, nprobe) / ReadBandwidth();
  }
  const auto centroids = f.cache.For(f.quantizer);
  int64_t first = 0;
  const double start = Seconds();
  for (auto _ : state) {
    index::ListScanSearch(f.ivf.get(), nullptr, f.queries.data() + first * kCoarseDim, nq, k,
                          nprobe, nullptr, distances.data(), labels.data(), centroids.get());
    benchmark::DoNotOptimize(distances.data());
    first = 100 - first;
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * nq);
  SetFloorRatio(state, Seconds() - start, floor_seconds / 200 * double(nq));
}
BENCHMARK(BM_Stage1ListScan100kBatch100)->Unit(benchmark::kMicrosecond);

void BM_Stage1ListScan1M(benchmark::State& state) { RunStage1(state, false, false); }
void BM_Stage1Faiss1M(benchmark::State& state) { RunStage1(state, true, false); }
void BM_Stage1ListScanSq8_1M(benchmark::State& state) { RunStage1(state, false, true); }
void BM_Stage1FaissSq8_1M(benchmark::State& state) { RunStage1(state, true, true); }
BENCHMARK(BM_Stage1ListScan1M)->ArgName("nprobe")->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Stage1Faiss1M)->ArgName("nprobe")->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Stage1ListScanSq8_1M)->ArgName("nprobe")->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Stage1FaissSq8_1M)->ArgName("nprobe")->Arg(16)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hedgedb

#pragma GCC diagnostic pop

BENCHMARK_MAIN();
