// The Cars-196 annotations (datasets/benchmark_sets_cars.cc): the input
// is cars_annos.mat, read through libmatio and the project's checks on it.
// Every entry read must lie under the root.
#include <filesystem>
#include <string>

#include "datasets/benchmark_sets.h"
#include "fuzz/fuzz_util.h"

using namespace hedgedb;
using hedgedb::datasets::BenchmarkSplit;
using hedgedb::datasets::ImageEntry;
using hedgedb::datasets::ImageSource;
using hedgedb::datasets::ReadCars196;
namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path root = fuzz::ScratchDir() / "cars";
  fs::create_directories(root);
  fuzz::WriteScratch("cars/cars_annos.mat", data, size);
  ImageSource source;
  if (!ReadCars196(root.string(), BenchmarkSplit::kAll, &source).ok()) return 0;
  const std::string prefix = root.string() + "/";
  for (const ImageEntry& e : source.entries) {
    if (e.path.compare(0, prefix.size(), prefix) != 0) __builtin_trap();
    if (e.has_box && (e.box.width <= 0 || e.box.height <= 0)) __builtin_trap();
  }
  return 0;
}
