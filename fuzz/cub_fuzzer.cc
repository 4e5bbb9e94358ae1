// The CUB-200-2011 annotation parser (datasets/benchmark_sets.cc,
// ParseCub200, which ReadCub200 calls with the files' contents): images.txt,
// image_class_labels.txt, bounding_boxes.txt and classes.txt (train_test_split.txt
// is not read: the protocol splits by class). The input holds the four files
// one after another, separated by a 0xFF byte; files past the input's end are
// absent (classes.txt is optional); the last byte picks the split. Parsed from
// memory, so no file is written per input. Every entry read must lie under the
// root's images/ folder.
#include <string>

#include "datasets/benchmark_sets.h"

using namespace hedgedb;
using hedgedb::datasets::BenchmarkSplit;
using hedgedb::datasets::CubAnnotations;
using hedgedb::datasets::ImageEntry;
using hedgedb::datasets::ImageSource;
using hedgedb::datasets::ParseCub200;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CubAnnotations files;
  std::string* const parts[] = {&files.images, &files.image_class_labels, &files.bounding_boxes,
                                &files.classes};
  size_t at = 0;
  int present = 0;
  for (std::string* part : parts) {
    if (at > size) break;
    size_t end = at;
    while (end < size && data[end] != 0xFF) ++end;
    part->assign(reinterpret_cast<const char*>(data) + at, end - at);
    ++present;
    at = end + 1;
  }
  files.has_classes = present == 4;
  ImageSource source;
  const uint8_t split = size > 0 ? data[size - 1] % 3 : 0;
  const std::string root = "/fuzz/cub";
  if (!ParseCub200(root, files, BenchmarkSplit(split), &source).ok()) return 0;
  const std::string images = root + "/images/";
  for (const ImageEntry& e : source.entries) {
    if (e.path.compare(0, images.size(), images) != 0) __builtin_trap();
  }
  return 0;
}
