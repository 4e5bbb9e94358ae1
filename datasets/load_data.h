// Turns a data source string into EncoderData (encoders/data/encoder_data.h)
// by calling the readers: N-item composites of an IDX base set (Fashion-MNIST,
// MNIST, any MNIST-layout directory), CUB/Cars images or precomputed feature
// vectors.
//
// Data source strings (the `--data` flag of the CLI):
//   fashion-mnist            Debian's /usr/share/datasets/fashion-mnist
//   mnist                    $HEDGEDB_MNIST_DIR, else /usr/share/datasets/mnist
//   idx:DIR                  any MNIST-layout directory
//   cub:ROOT, cars:ROOT      CUB-200-2011 / Cars-196 in their official layouts
//                            (benchmark_sets.h): the class-disjoint split
//                            (CUB 1-100 / 101-200, Cars 1-98 / 99-196), each
//                            image decoded once, resized to 3 x S x S
//                            (image_size; cropped to its bounding box first
//                            with bbox) and kept in memory. No corrupt twin.
//   features:FEATS.npy,LABELS.npy
//                            N x F features; the lower half of the sorted
//                            classes trains, the upper half tests (the
//                            class-disjoint protocol of the F-statistic
//                            paper's CUB split). Features have no corrupt twin.
#pragma once

#include <cstdint>
#include <string>

#include "encoders/data/data_settings.h"
#include "encoders/data/encoder_data.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace datasets {

struct DataOptions {
  std::string source = "fashion-mnist";
  int items = 2;  // N of the N-item composites (images only)
  // How the composites' splits are sized (datasets/composite_dataset.h):
  // "reference" (the reference generator's rule), "hib" (HIB Table 3's class
  // counts; the base must supply the items) or "hib-scaled" (Table 3's class
  // counts, items per class capped at what the base supplies).
  std::string composite_layout = "reference";
  // Composite sizes (HIB appendix A: 100000 train, 10000 per test split).
  int64_t train_total = 100000;
  int64_t test_total = 10000;
  // Fraction of the training items held out for validation (early stopping).
  double val_fraction = 0.0;
  uint64_t seed = 0;  // the data set's own seed (class split, test occlusions)
  // Per-item probability of a fresh random occlusion in training batches
  // (HIB: 0.2). Touches neither the class split nor any stored occlusion.
  double train_occlusion = 0.2;
  // cub:/cars: images: side S of the 3 x S x S input, and whether to crop to
  // the annotated bounding box (ingest-images/query-image need the same
  // --fit resize [--bbox]).
  int64_t image_size = 64;
  bool bbox = false;
  // cub:/cars: the last training class id (0: the official 100 / 98).
  int64_t class_split = 0;
};

// The settings of `options` that its source uses, as a model file records
// them (recorded = true).
encoders::DataSettings SettingsOf(const DataOptions& options);

// Loads the data set. Errors name the missing file, the bad option (by its
// field here, "val_fraction must be in [0, 1)", or CompositeConfig's, never a
// CLI flag) or the inconsistency (e.g. labels out of range, too few items per
// class).
Status LoadEncoderData(const DataOptions& options, encoders::EncoderData* data);

}  // namespace datasets
}  // namespace hedgedb
