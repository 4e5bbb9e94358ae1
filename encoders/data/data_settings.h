// The data settings a model was trained with. `train` records them in the
// model file, so that embed, evaluate, ingest-images and query-image default
// to the same data and refuse a flag that contradicts them (docs/cli.md,
// "The model carries its data"). Only the settings the source uses are
// recorded; the others stay at their zero values.
#pragma once

#include <cstdint>
#include <string>

namespace hedgedb {
namespace encoders {

struct DataSettings {
  bool recorded = false;  // false: a model file written before models carried it
  // The data source as `--data` names it: "fashion-mnist", "idx:/abs/dir",
  // "cub:/abs/root", "features:F.npy,L.npy", ...
  std::string source;
  uint64_t seed = 0;  // --data-seed: class split, validation, test occlusions
  // N-item composites (fashion-mnist, mnist, idx:DIR).
  int64_t items = 0;
  // --composite-layout; empty in a model file written before it was recorded
  // (those were built with "reference").
  std::string composite_layout;
  int64_t train_total = 0;
  int64_t test_total = 0;
  // cub:ROOT and cars:ROOT.
  int64_t image_size = 0;   // inputs are 3 x S x S
  bool bbox = false;        // cropped to the annotated box first
  int64_t class_split = 0;  // classes with id <= this train, the others test
  // How image files are fitted to the model's input: "resize" (cub/cars: the
  // loader resizes every image) or "exact" (composites are already the size).
  // Empty for feature vectors.
  std::string image_fit;
};

// Which settings a source uses: "composites", "benchmark" (cub:, cars: and
// folder:, image files read for the class-disjoint protocol) or "features".
inline const char* DataFamily(const std::string& source) {
  if (source.rfind("cub:", 0) == 0 || source.rfind("cars:", 0) == 0 ||
      source.rfind("folder:", 0) == 0) {
    return "benchmark";
  }
  if (source.rfind("features:", 0) == 0) return "features";
  return "composites";
}

}  // namespace encoders
}  // namespace hedgedb
