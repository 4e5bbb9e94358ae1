// The .npy reader (common/npy.cc) and the conversions the CLI applies to
// embeddings (float32) and labels (int64), which the Python binding applies
// to its arguments too (ids, labels, codes: NpyTypeOf, NpyToInt64,
// NpyToInt32; float64 arrays: DoublesToFloat32). A file that reads must
// write back and read again to the same array, and a conversion that
// succeeds must be exact: every integer equals its element, every float32
// is finite and nonzero where its float64 was.
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "hedgedb/npy.h"

using namespace hedgedb;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::WriteScratch("in.npy", data, size);
  NpyArray array;
  if (!ReadNpy(path, &array).ok()) return 0;
  std::vector<float> floats;
  (void)NpyToFloat32(array, "embeddings", &floats);
  std::vector<int64_t> ints;
  if (NpyToInt64(array, "labels", &ints).ok()) {
    const int size = NpyElementSize(array.type);
    for (size_t i = 0; i < ints.size(); ++i) {
      const uint8_t* p = array.bytes.data() + i * size_t(size);
      bool exact = true;
      switch (array.type) {
        case NpyType::kFloat32: {
          float v;
          std::memcpy(&v, p, sizeof(v));
          exact = double(v) == double(ints[i]) && std::trunc(v) == v;
          break;
        }
        case NpyType::kFloat64: {
          double v;
          std::memcpy(&v, p, sizeof(v));
          exact = v == double(ints[i]) && std::trunc(v) == v;
          break;
        }
        case NpyType::kUInt64: {
          uint64_t v;
          std::memcpy(&v, p, sizeof(v));
          exact = v == uint64_t(ints[i]) && ints[i] >= 0;
          break;
        }
        default:
          break;  // narrower integers always fit
      }
      if (!exact) __builtin_trap();
    }
    std::vector<int32_t> narrow;
    if (NpyToInt32(array, "codes", &narrow).ok()) {
      for (size_t i = 0; i < narrow.size(); ++i) {
        if (int64_t(narrow[i]) != ints[i]) __builtin_trap();
      }
    }
  }
  if (array.type == NpyType::kFloat64) {
    std::vector<double> wide(array.bytes.size() / sizeof(double));
    if (!wide.empty()) std::memcpy(wide.data(), array.bytes.data(), array.bytes.size());
    std::vector<float> narrow(wide.size());
    if (DoublesToFloat32(wide.data(), wide.size(), "x", narrow.data()).ok()) {
      for (size_t i = 0; i < wide.size(); ++i) {
        if (std::isfinite(wide[i]) &&
            (!std::isfinite(narrow[i]) || (wide[i] != 0) != (narrow[i] != 0))) {
          __builtin_trap();
        }
      }
    }
  }
  // Every dtype the reader knows maps back through NpyTypeOf.
  NpyType back;
  const char* descr = NpyDescr(array.type);  // "<f4", "|u1", ...
  if (!NpyTypeOf(descr[1], NpyElementSize(array.type), &back) || back != array.type) {
    __builtin_trap();
  }
  const std::string again_path = (fuzz::ScratchDir() / "again.npy").string();
  if (!WriteNpy(again_path, array).ok()) __builtin_trap();
  NpyArray again;
  if (!ReadNpy(again_path, &again).ok() || again.type != array.type || again.shape != array.shape ||
      again.bytes != array.bytes) {
    __builtin_trap();
  }
  return 0;
}
