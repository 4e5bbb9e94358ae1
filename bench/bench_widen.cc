// What widening compact rows costs (common/row_layout.h, common/half.h):
// float16 and bfloat16 values to float32 in a run, and the rows of 100
// scattered candidates of a 311,470-row arena (a two-stage query's
// stage 2 on the real-embedding collection of bench/RESULTS.md, "Compact
// rows": gaussian D = 32) widened into a tile, against copying the float32
// rows. The scorers then run their float32 kernels on the tile.
//
//   cmake --build build -j2 --target bench_widen
//   taskset -c 1 build/bin/bench_widen
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "common/row_layout.h"

namespace hedgedb {
namespace {

constexpr size_t kValues = size_t(1) << 14;

std::vector<float> Values() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(kValues);
  for (float& x : v) x = normal(rng);
  return v;
}

void BM_HalvesToFloats(benchmark::State& state) {
  const std::vector<float> v = Values();
  std::vector<uint16_t> h(kValues);
  for (size_t i = 0; i < kValues; ++i) h[i] = FloatToHalf(v[i]);
  std::vector<float> out(kValues);
  for (auto _ : state) {
    HalvesToFloats(h.data(), kValues, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(kValues));
}
BENCHMARK(BM_HalvesToFloats);

void BM_Bfloat16sToFloats(benchmark::State& state) {
  const std::vector<float> v = Values();
  std::vector<uint16_t> h(kValues);
  for (size_t i = 0; i < kValues; ++i) h[i] = FloatToBfloat16(v[i]);
  std::vector<float> out(kValues);
  for (auto _ : state) {
    Bfloat16sToFloats(h.data(), kValues, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(kValues));
}
BENCHMARK(BM_Bfloat16sToFloats);

void BM_CopyFloats(benchmark::State& state) {
  const std::vector<float> v = Values();
  std::vector<float> out(kValues);
  for (auto _ : state) {
    std::memcpy(out.data(), v.data(), kValues * sizeof(float));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(kValues));
}
BENCHMARK(BM_CopyFloats);

// 100 scattered rows of a 311,470-row arena widened into a tile (arg: the
// row format), a new set of rows each time so that they come from memory.
void BM_WidenCandidates(benchmark::State& state) {
  RowShape shape;
  shape.kind = Kind::kGaussian;
  shape.dim = 32;
  shape.format = RowFormat(state.range(0));
  const size_t rows = 311470, stride = shape.item_row_bytes();
  std::vector<uint8_t> arena(rows * stride);
  std::mt19937 rng(2);
  for (auto& b : arena) b = uint8_t(rng() & 0x3f);  // finite values
  std::vector<int64_t> candidates(100 * 1024);
  for (auto& r : candidates) r = int64_t(rng() % rows);
  std::vector<float> tile(100 * shape.item_row_size());
  size_t round = 0;
  for (auto _ : state) {
    const int64_t* named = candidates.data() + (round++ % 1024) * 100;
    WidenRows(shape, arena.data(), stride, named, 100, tile.data());
    benchmark::DoNotOptimize(tile.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * 100);
  state.SetLabel(RowFormatName(shape.format));
}
BENCHMARK(BM_WidenCandidates)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace hedgedb

BENCHMARK_MAIN();
