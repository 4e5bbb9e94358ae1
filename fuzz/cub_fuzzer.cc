// The CUB-200-2011 annotation parsers (datasets/benchmark_sets.cc):
// images.txt, image_class_labels.txt, bounding_boxes.txt and classes.txt
// (train_test_split.txt is not read: the protocol splits by class). The input
// holds the four files one after another, separated by a 0xFF byte; files
// past the input's end are absent; the last byte picks the split.
// Every entry read must lie under the root's images/ folder.
#include <filesystem>
#include <string>

#include "datasets/benchmark_sets.h"
#include "fuzz/fuzz_util.h"

using namespace hedgedb;
using namespace hedgedb::encoders;
namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kFiles[] = {"images.txt", "image_class_labels.txt", "bounding_boxes.txt",
                                       "classes.txt"};
  const fs::path root = fuzz::ScratchDir() / "cub";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root / "images");
  size_t at = 0;
  for (const char* name : kFiles) {
    if (at > size) break;
    size_t end = at;
    while (end < size && data[end] != 0xFF) ++end;
    fuzz::WriteScratch(std::string("cub/") + name, data + at, end - at);
    at = end + 1;
  }
  ImageSource source;
  const uint8_t split = size > 0 ? data[size - 1] % 3 : 0;
  if (!ReadCub200(root.string(), BenchmarkSplit(split), &source).ok()) return 0;
  const std::string images = (root / "images").string() + "/";
  for (const ImageEntry& e : source.entries) {
    if (e.path.compare(0, images.size(), images) != 0) __builtin_trap();
  }
  return 0;
}
