// The data sets the trainer, the embedder and the evaluation read, behind one
// torch-free interface: N-item composites of an IDX base set (Fashion-MNIST,
// MNIST, any MNIST-layout directory) or precomputed feature vectors.
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "encoders/data/batch_samplers.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// A fixed list of items that can be rendered as float inputs.
struct ItemSet {
  std::vector<int64_t> labels;
  // Per-item input shape, e.g. {1, 28, 56} or {F}.
  std::vector<int64_t> input_shape;
  // Writes items `items` (indices into labels) to `out`, item-major, each
  // item_floats() values. `corrupt`: the stored corrupt twin (images only;
  // ignored where there is none).
  std::function<void(const std::vector<int64_t>& items, bool corrupt, float* out)> render;
  // Training rendering with fresh augmentation (occlusion with the training
  // probability); equal to render(items, false, out) for features.
  std::function<void(const std::vector<int64_t>& items, SeededRng* rng, float* out)> render_train;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t item_floats() const;
  // Items [first, first + n) as floats.
  std::vector<float> Render(const std::vector<int64_t>& items, bool corrupt) const;
};

struct DataOptions {
  std::string source = "fashion-mnist";
  int items = 2;  // N of the N-item composites (images only)
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
};

struct EncoderData {
  std::string description;   // e.g. "fashion-mnist 2-item composites"
  bool has_corrupt = false;  // test sets have a corrupt twin
  int64_t num_train_classes = 0;
  // Input normalisation the model should use (per channel / per feature).
  std::vector<double> input_mean, input_std;
  ItemSet train;
  ItemSet validation;   // empty when val_fraction is 0
  ItemSet test;         // composites: seen + unseen test classes (HIB's test set)
  ItemSet test_seen;    // composites only (features: same as test)
  ItemSet test_unseen;  // composites only (features: same as test)
};

// Loads the data set. Errors name the missing file, the bad option or the
// inconsistency (e.g. labels out of range, too few items per class).
Status LoadEncoderData(const DataOptions& options, EncoderData* data);

// Picks the split by name: train, validation, test, test-seen, test-unseen.
Status SelectSplit(const EncoderData& data, const std::string& split, const ItemSet** set);

// A subset of `set`: at most max_items items drawn uniformly without
// replacement (seeded), kept in ascending order. max_items <= 0: all.
std::vector<int64_t> SubsetItems(const ItemSet& set, int64_t max_items, uint64_t seed);

}  // namespace encoders
}  // namespace hedgedb
