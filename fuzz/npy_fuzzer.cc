// The .npy reader (common/npy.cc) and the conversions the CLI applies to
// embeddings (float32) and labels (int64). A file that reads must write back
// and read again to the same array.
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
  (void)NpyToInt64(array, "labels", &ints);
  const std::string again_path = (fuzz::ScratchDir() / "again.npy").string();
  if (!WriteNpy(again_path, array).ok()) __builtin_trap();
  NpyArray again;
  if (!ReadNpy(again_path, &again).ok() || again.type != array.type || again.shape != array.shape ||
      again.bytes != array.bytes) {
    __builtin_trap();
  }
  return 0;
}
