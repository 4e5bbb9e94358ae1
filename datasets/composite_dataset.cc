#include "datasets/composite_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

namespace hedgedb {
namespace datasets {

using encoders::SeededRng;

namespace {

// Independent random streams of one CompositeConfig::seed (SeededRng::DeriveSeed),
// so e.g. changing test_total does not change the training items.
enum RandomStream : uint64_t {
  kClassSplitStream = 1,
  kTrainItemsStream = 2,
  kTestSeenItemsStream = 3,
  kTestUnseenItemsStream = 4,
  kValidationOcclusionStream = 5,
  kTestSeenOcclusionStream = 6,
  kTestUnseenOcclusionStream = 7,
};

constexpr int64_t kMaxClasses = int64_t{1} << 31;

std::string SplitName(const char* name) { return std::string("composites (") + name + ")"; }

Status CheckBase(const char* which, const std::shared_ptr<const LabeledImages>& base,
                 int num_base_classes) {
  if (base == nullptr) {
    return Status::InvalidArgument(std::string("composites: no base ") + which + " split");
  }
  const IdxImages& images = base->images;
  if (images.count < 1 || images.rows < 1 || images.cols < 1 ||
      static_cast<int64_t>(images.pixels.size()) != images.count * images.pixels_per_image() ||
      static_cast<int64_t>(base->labels.size()) != images.count) {
    return Status::InvalidArgument(
        std::string("composites: base ") + which + " split has " + std::to_string(images.count) +
        " images of " + std::to_string(images.rows) + " x " + std::to_string(images.cols) + ", " +
        std::to_string(images.pixels.size()) + " pixels and " +
        std::to_string(base->labels.size()) + " labels");
  }
  for (size_t i = 0; i < base->labels.size(); ++i) {
    if (base->labels[i] < 0 || base->labels[i] >= num_base_classes) {
      return Status::InvalidArgument(std::string("composites: base ") + which + " label " +
                                     std::to_string(base->labels[i]) + " at index " +
                                     std::to_string(i) + " is outside [0, " +
                                     std::to_string(num_base_classes) + ")");
    }
  }
  return Status::OK();
}

Status CheckProbability(const char* name, double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    return Status::InvalidArgument(std::string("composites: ") + name + " " + std::to_string(p) +
                                   " is not a probability");
  }
  return Status::OK();
}

// Keeps `keep` of the classes, drawn without replacement (all of them when
// keep >= their count, without drawing).
void SubsampleClasses(int64_t keep, SeededRng* rng, std::vector<int64_t>* classes) {
  if (keep >= static_cast<int64_t>(classes->size())) return;
  for (int64_t i = 0; i < keep; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng->UniformInt(classes->size() - i));
    std::swap((*classes)[i], (*classes)[j]);
  }
  classes->resize(keep);
}

// The reference generator's per-split rule: total / #classes items per class,
// raised to the floor `min_per_class`, in which case the classes are
// subsampled so that the split keeps about `total` items.
Status ChooseSplitClasses(const char* name, std::vector<int64_t> candidates, int64_t total,
                          int64_t min_per_class, SeededRng* rng, std::vector<int64_t>* classes,
                          int64_t* per_class) {
  if (candidates.empty() || total < 1) {
    return Status::InvalidArgument(SplitName(name) + ": " + std::to_string(candidates.size()) +
                                   " candidate classes for " + std::to_string(total) + " items");
  }
  int64_t per = total / static_cast<int64_t>(candidates.size());
  if (per < min_per_class) {
    per = min_per_class;
    const int64_t keep = total / per;
    if (keep < 1) {
      return Status::InvalidArgument(SplitName(name) + ": " + std::to_string(total) +
                                     " items cannot give any class " +
                                     std::to_string(min_per_class) + " items");
    }
    SubsampleClasses(keep, rng, &candidates);
  }
  std::sort(candidates.begin(), candidates.end());
  *classes = std::move(candidates);
  *per_class = per;
  return Status::OK();
}

// HIB appendix A, Table 3: the class counts of the training split and of the
// seen and unseen test splits.
struct HibTable3 {
  int64_t train = 0;
  int64_t seen = 0;
  int64_t unseen = 0;
};

Status HibTable3For(const CompositeConfig& config, HibTable3* table) {
  if (config.num_base_classes != 10 || (config.num_positions != 2 && config.num_positions != 3)) {
    return Status::InvalidArgument(
        "composites: the HIB Table 3 layout is defined for N = 2 and 3 positions over 10 base "
        "labels (2- and 3-digit MNIST), got N = " +
        std::to_string(config.num_positions) + " over " + std::to_string(config.num_base_classes) +
        " labels: use layout reference (the reference generator's rule)");
  }
  if (config.validation_items_per_class != 0) {
    return Status::InvalidArgument(
        "composites: the HIB layouts take validation_fraction, not validation_items_per_class");
  }
  if (!(config.validation_fraction >= 0.0 && config.validation_fraction < 1.0)) {
    return Status::InvalidArgument("composites: validation_fraction " +
                                   std::to_string(config.validation_fraction) +
                                   " is not in [0, 1)");
  }
  *table = config.num_positions == 2 ? HibTable3{70, 70, 30} : HibTable3{700, 100, 100};
  return Status::OK();
}

// Per base label, the base indices carrying it (ascending).
std::vector<std::vector<int64_t>> IndicesByLabel(const LabeledImages& base, int num_base_classes) {
  std::vector<std::vector<int64_t>> by_label(num_base_classes);
  for (size_t i = 0; i < base.labels.size(); ++i) {
    by_label[base.labels[i]].push_back(static_cast<int64_t>(i));
  }
  return by_label;
}

// The base label with the fewest images among the labels of `classes` (the
// lowest such label on ties), and its count; -1 and 0 for no classes.
void ScarcestLabel(const std::vector<int64_t>& classes,
                   const std::vector<std::vector<int64_t>>& by_label, int num_positions,
                   int num_base_classes, int64_t* label, int64_t* count) {
  int64_t scarcest = -1;
  for (const int64_t c : classes) {
    for (const int64_t digit : DecomposeClassLabel(c, num_positions, num_base_classes)) {
      if (scarcest < 0 || by_label[digit].size() < by_label[scarcest].size() ||
          (by_label[digit].size() == by_label[scarcest].size() && digit < scarcest)) {
        scarcest = digit;
      }
    }
  }
  *label = scarcest;
  *count = scarcest < 0 ? 0 : static_cast<int64_t>(by_label[scarcest].size());
}

// For every class, items_per_class (+ extra_per_class for a second set)
// composites whose base images at each position are distinct. The first
// items_per_class go to `main`, the rest to `extra`.
Status FillItems(const char* name, const std::vector<int64_t>& classes, int64_t items_per_class,
                 int64_t extra_per_class, const std::vector<std::vector<int64_t>>& by_label,
                 int num_positions, int num_base_classes, SeededRng* rng, CompositeSet* main,
                 CompositeSet* extra) {
  const int64_t needed = items_per_class + extra_per_class;
  // The scarcest base label among the split's classes bounds the items per
  // class (each position draws without replacement within a class); checked
  // up front so that the message names the bound, not just the first class
  // that hits it.
  int64_t scarcest = -1, fit = 0;
  ScarcestLabel(classes, by_label, num_positions, num_base_classes, &scarcest, &fit);
  if (scarcest >= 0 && fit < needed) {
    return Status::InvalidArgument(
        SplitName(name) + ": " + std::to_string(classes.size()) + " classes of " +
        std::to_string(needed) + " items" +
        (extra_per_class > 0 ? " (" + std::to_string(items_per_class) + " + " +
                                   std::to_string(extra_per_class) + " validation)"
                             : std::string()) +
        " need " + std::to_string(needed) + " distinct base images of each of their labels, but " +
        "the base split has " + std::to_string(fit) + " of label " + std::to_string(scarcest) +
        "; at most " + std::to_string(fit) + " items per class fit, " + std::to_string(fit) +
        " x " + std::to_string(classes.size()) + " = " +
        std::to_string(fit * static_cast<int64_t>(classes.size())) + " for this split" +
        (extra_per_class > 0 ? ", validation included" : "") +
        ": ask for fewer (train_total, test_total), or fewer positions (num_positions)");
  }
  const std::vector<OcclusionRect> no_occlusion(num_positions);
  std::vector<std::vector<int64_t>> drawn(num_positions);
  std::vector<int64_t> base_indices(num_positions);
  for (const int64_t label : classes) {
    const std::vector<int64_t> digits = DecomposeClassLabel(label, num_positions, num_base_classes);
    for (int p = 0; p < num_positions; ++p) {
      std::vector<int64_t> pool = by_label[digits[p]];
      if (static_cast<int64_t>(pool.size()) < needed) {
        return Status::InvalidArgument(
            SplitName(name) + ": class " + std::to_string(label) + " needs " +
            std::to_string(needed) + " distinct base images of label " + std::to_string(digits[p]) +
            " but the base split has " + std::to_string(pool.size()) +
            "; ask for fewer items per class: a smaller train_total or test_total, or fewer "
            "positions (num_positions)");
      }
      for (int64_t i = 0; i < needed; ++i) {
        const int64_t j = i + static_cast<int64_t>(rng->UniformInt(pool.size() - i));
        std::swap(pool[i], pool[j]);
      }
      pool.resize(needed);
      drawn[p] = std::move(pool);
    }
    for (int64_t i = 0; i < needed; ++i) {
      for (int p = 0; p < num_positions; ++p) base_indices[p] = drawn[p][i];
      (i < items_per_class ? main : extra)->AddItem(label, base_indices, no_occlusion);
    }
  }
  return Status::OK();
}

}  // namespace

OcclusionRect DrawOcclusion(int32_t rows, int32_t cols, SeededRng* rng) {
  // SPE appendix E order: width, height, then the corner where it fits.
  OcclusionRect rect;
  rect.width = static_cast<int32_t>(rng->UniformIntInclusive(0, cols));
  rect.height = static_cast<int32_t>(rng->UniformIntInclusive(0, rows));
  rect.left = static_cast<int32_t>(rng->UniformIntInclusive(0, cols - rect.width));
  rect.top = static_cast<int32_t>(rng->UniformIntInclusive(0, rows - rect.height));
  return rect;
}

const char* CompositeLayoutName(CompositeLayout layout) {
  switch (layout) {
    case CompositeLayout::kHib:
      return "hib";
    case CompositeLayout::kHibScaled:
      return "hib-scaled";
    case CompositeLayout::kReference:
      break;
  }
  return "reference";
}

bool ParseCompositeLayout(const std::string& name, CompositeLayout* layout) {
  for (CompositeLayout l :
       {CompositeLayout::kReference, CompositeLayout::kHib, CompositeLayout::kHibScaled}) {
    if (name == CompositeLayoutName(l)) {
      *layout = l;
      return true;
    }
  }
  return false;
}

int64_t ValidationItemsFor(int64_t per_class, double fraction) {
  if (!(fraction > 0)) return 0;
  return std::max<int64_t>(2, std::llround(static_cast<double>(per_class) * fraction));
}

std::string DescribeCompositeSizes(const NDigitComposites& composites) {
  std::string text;
  for (const CompositeSplitSize& size : composites.sizes) {
    if (!text.empty()) text += "; ";
    text += size.split + " " + std::to_string(size.classes) + " x " +
            std::to_string(size.items_per_class);
    if (size.validation_per_class > 0) {
      text += " (+ " + std::to_string(size.validation_per_class) + " validation)";
    }
    if (size.scaled) {
      text += " (HIB " + std::to_string(size.requested_per_class) +
              ", scaled: " + std::to_string(size.scarcest_count) + " base images of label " +
              std::to_string(size.scarcest_label) + ")";
    }
  }
  return text;
}

int64_t ComposeClassLabel(const std::vector<int64_t>& base_labels, int num_base_classes) {
  int64_t label = 0;
  for (const int64_t digit : base_labels) label = label * num_base_classes + digit;
  return label;
}

std::vector<int64_t> DecomposeClassLabel(int64_t label, int num_positions, int num_base_classes) {
  std::vector<int64_t> digits(num_positions);
  for (int p = num_positions - 1; p >= 0; --p) {
    digits[p] = label % num_base_classes;
    label /= num_base_classes;
  }
  return digits;
}

// ---------------------------------------------------------------------------

CompositeSet::CompositeSet(std::shared_ptr<const LabeledImages> base, int num_positions)
    : base_(std::move(base)), num_positions_(num_positions) {}

int32_t CompositeSet::rows() const { return base_ == nullptr ? 0 : base_->images.rows; }

int32_t CompositeSet::cols() const {
  return base_ == nullptr ? 0 : base_->images.cols * num_positions_;
}

void CompositeSet::AddItem(int64_t label, const std::vector<int64_t>& base_indices,
                           const std::vector<OcclusionRect>& occlusions) {
  labels_.push_back(label);
  base_indices_.insert(base_indices_.end(), base_indices.begin(), base_indices.end());
  occlusions_.insert(occlusions_.end(), occlusions.begin(), occlusions.end());
}

void CompositeSet::FinishClasses() {
  classes_ = labels_;
  std::sort(classes_.begin(), classes_.end());
  classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
}

void CompositeSet::SetStoredOcclusion(int64_t item, int position, const OcclusionRect& rect) {
  occlusions_[item * num_positions_ + position] = rect;
}

void CompositeSet::Render(int64_t item, const OcclusionRect* rects, uint8_t* out) const {
  const int32_t base_rows = base_->images.rows;
  const int32_t base_cols = base_->images.cols;
  const int32_t out_cols = base_cols * num_positions_;
  for (int p = 0; p < num_positions_; ++p) {
    const uint8_t* source = base_->images.image(base_index(item, p));
    for (int32_t r = 0; r < base_rows; ++r) {
      std::memcpy(out + r * out_cols + p * base_cols, source + r * base_cols, base_cols);
    }
    const OcclusionRect& rect = rects[p];
    if (rect.empty()) continue;
    for (int32_t r = rect.top; r < rect.top + rect.height; ++r) {
      std::memset(out + r * out_cols + p * base_cols + rect.left, 0, rect.width);
    }
  }
}

void CompositeSet::RenderClean(int64_t item, uint8_t* out) const {
  const std::vector<OcclusionRect> none(num_positions_);
  Render(item, none.data(), out);
}

void CompositeSet::RenderStored(int64_t item, uint8_t* out) const {
  Render(item, occlusions_.data() + item * num_positions_, out);
}

void CompositeSet::RenderRandom(int64_t item, double probability, SeededRng* rng, uint8_t* out,
                                OcclusionRect* rects) const {
  std::vector<OcclusionRect> drawn(num_positions_);
  for (int p = 0; p < num_positions_; ++p) {
    // One Bernoulli draw per position whatever the outcome, so that the
    // stream stays aligned across probabilities.
    if (rng->Bernoulli(probability)) drawn[p] = DrawOcclusion(rows(), base_->images.cols, rng);
  }
  Render(item, drawn.data(), out);
  if (rects != nullptr) std::copy(drawn.begin(), drawn.end(), rects);
}

void CompositeSet::RenderBatchFloat(const std::vector<int64_t>& items, Variant variant,
                                    float* out) const {
  std::vector<uint8_t> pixels(pixels_per_item());
  for (size_t i = 0; i < items.size(); ++i) {
    if (variant == Variant::kClean) {
      RenderClean(items[i], pixels.data());
    } else {
      RenderStored(items[i], pixels.data());
    }
    PixelsToFloat(pixels.data(), pixels_per_item(), out + i * pixels_per_item());
  }
}

void CompositeSet::RenderBatchFloatRandom(const std::vector<int64_t>& items, double probability,
                                          SeededRng* rng, float* out) const {
  std::vector<uint8_t> pixels(pixels_per_item());
  for (size_t i = 0; i < items.size(); ++i) {
    RenderRandom(items[i], probability, rng, pixels.data());
    PixelsToFloat(pixels.data(), pixels_per_item(), out + i * pixels_per_item());
  }
}

// ---------------------------------------------------------------------------

Status BuildNDigitComposites(const CompositeConfig& config,
                             std::shared_ptr<const LabeledImages> base_train,
                             std::shared_ptr<const LabeledImages> base_test,
                             NDigitComposites* composites) {
  const int n = config.num_positions;
  const int k = config.num_base_classes;
  if (n < 1 || k < 2) {
    return Status::InvalidArgument(
        "composites: need num_positions >= 1 and num_base_classes >= 2"
        ", got " +
        std::to_string(n) + " and " + std::to_string(k));
  }
  int64_t total_classes = 1;
  for (int p = 0; p < n; ++p) {
    total_classes *= k;
    if (total_classes > kMaxClasses) {
      return Status::InvalidArgument("composites: " + std::to_string(k) + "^" + std::to_string(n) +
                                     " classes do not fit in 2^31");
    }
  }
  if (config.min_items_per_class < 1 || config.validation_items_per_class < 0) {
    return Status::InvalidArgument(
        "composites: min_items_per_class must be >= 1 and "
        "validation_items_per_class >= 0");
  }
  HEDGEDB_RETURN_IF_ERROR(
      CheckProbability("train_occlusion_probability", config.train_occlusion_probability));
  HEDGEDB_RETURN_IF_ERROR(
      CheckProbability("corrupt_occlusion_probability", config.corrupt_occlusion_probability));
  if (!(config.train_class_fraction > 0.0 && config.train_class_fraction < 1.0)) {
    return Status::InvalidArgument("composites: train_class_fraction " +
                                   std::to_string(config.train_class_fraction) +
                                   " must lie strictly between 0 and 1");
  }
  HEDGEDB_RETURN_IF_ERROR(CheckBase("train", base_train, k));
  HEDGEDB_RETURN_IF_ERROR(CheckBase("test", base_test, k));
  if (base_train->images.rows != base_test->images.rows ||
      base_train->images.cols != base_test->images.cols) {
    return Status::InvalidArgument(
        "composites: base train images are " + std::to_string(base_train->images.rows) + " x " +
        std::to_string(base_train->images.cols) + " but base test images are " +
        std::to_string(base_test->images.rows) + " x " + std::to_string(base_test->images.cols));
  }

  const bool hib = config.layout != CompositeLayout::kReference;
  const bool scale = config.layout == CompositeLayout::kHibScaled;
  HibTable3 table;
  if (hib) {
    HEDGEDB_RETURN_IF_ERROR(HibTable3For(config, &table));
  } else if (config.validation_fraction != 0.0) {
    return Status::InvalidArgument(
        "composites: validation_fraction is for the HIB layouts; the reference layout takes "
        "validation_items_per_class");
  }

  // Class split. The epsilon keeps 0.7 * 100 from rounding down to 69.
  const int64_t num_train_classes =
      hib ? table.train
          : static_cast<int64_t>(std::floor(
                config.train_class_fraction * static_cast<double>(total_classes) + 1e-9));
  if (num_train_classes < 1 || num_train_classes >= total_classes) {
    return Status::InvalidArgument(
        "composites: train_class_fraction " + std::to_string(config.train_class_fraction) + " of " +
        std::to_string(total_classes) + " classes leaves no training or no unseen class");
  }
  std::vector<int64_t> all_classes(total_classes);
  for (int64_t c = 0; c < total_classes; ++c) all_classes[c] = c;
  SeededRng split_rng(SeededRng::DeriveSeed(config.seed, kClassSplitStream));
  split_rng.Shuffle(&all_classes);
  NDigitComposites out;
  out.config = config;
  out.train_classes.assign(all_classes.begin(), all_classes.begin() + num_train_classes);
  out.unseen_classes.assign(all_classes.begin() + num_train_classes, all_classes.end());
  std::sort(out.train_classes.begin(), out.train_classes.end());
  std::sort(out.unseen_classes.begin(), out.unseen_classes.end());

  out.train = CompositeSet(base_train, n);
  out.validation = CompositeSet(base_train, n);
  out.test_seen = CompositeSet(base_test, n);
  out.test_unseen = CompositeSet(base_test, n);

  const std::vector<std::vector<int64_t>> train_by_label = IndicesByLabel(*base_train, k);
  const std::vector<std::vector<int64_t>> test_by_label = IndicesByLabel(*base_test, k);

  // Each split: its classes (drawn with the split's own stream, before its
  // items), then its sizes, then its items.
  struct Split {
    const char* name;
    const std::vector<int64_t>* candidates;
    int64_t total;
    int64_t hib_classes;  // Table 3's count (HIB layouts)
    const std::vector<std::vector<int64_t>>* by_label;
    CompositeSet* set;
    CompositeSet* validation;  // training split only
    RandomStream items_stream;
  };
  const std::vector<int64_t> table_train_classes = out.train_classes;
  for (const Split& split :
       {Split{"train", &table_train_classes, config.train_total, table.train, &train_by_label,
              &out.train, &out.validation, kTrainItemsStream},
        Split{"test seen", &out.train_classes, config.test_total, table.seen, &test_by_label,
              &out.test_seen, nullptr, kTestSeenItemsStream},
        Split{"test unseen", &out.unseen_classes, config.test_total, table.unseen, &test_by_label,
              &out.test_unseen, nullptr, kTestUnseenItemsStream}}) {
    SeededRng rng(SeededRng::DeriveSeed(config.seed, split.items_stream));
    const bool training = split.validation != nullptr;
    std::vector<int64_t> classes;
    CompositeSplitSize size;
    size.split = split.name;
    if (hib) {
      classes = *split.candidates;
      SubsampleClasses(split.hib_classes, &rng, &classes);
      std::sort(classes.begin(), classes.end());
      size.requested_per_class = split.total / split.hib_classes;
      size.items_per_class = size.requested_per_class;
      if (training) {
        size.validation_per_class =
            ValidationItemsFor(size.items_per_class, config.validation_fraction);
      }
      ScarcestLabel(classes, *split.by_label, n, k, &size.scarcest_label, &size.scarcest_count);
      if (scale) {
        // The largest count whose items (and validation items) fit.
        while (size.items_per_class > 0 &&
               size.items_per_class + size.validation_per_class > size.scarcest_count) {
          --size.items_per_class;
          if (training) {
            size.validation_per_class =
                ValidationItemsFor(size.items_per_class, config.validation_fraction);
          }
        }
        size.scaled = size.items_per_class < size.requested_per_class;
      }
      if (size.items_per_class < 2) {
        return Status::InvalidArgument(
            SplitName(split.name) + ", HIB Table 3 layout: " + std::to_string(classes.size()) +
            " classes of " + std::to_string(size.items_per_class) + " items (" +
            (size.scaled
                 ? "scaled down: the base split has " + std::to_string(size.scarcest_count) +
                       " images of label " + std::to_string(size.scarcest_label)
                 : std::to_string(split.total) + " / " + std::to_string(classes.size())) +
            "); a class needs at least 2 items (a matching pair): raise " +
            (training ? "train_total" : "test_total"));
      }
      if (!scale && size.items_per_class + size.validation_per_class > size.scarcest_count) {
        const int64_t fit = size.scarcest_count;
        return Status::InvalidArgument(
            SplitName(split.name) + ", HIB Table 3 layout: " + std::to_string(classes.size()) +
            " classes of " + std::to_string(size.items_per_class) + " items" +
            (size.validation_per_class > 0
                 ? " (+ " + std::to_string(size.validation_per_class) + " validation)"
                 : std::string()) +
            " need " + std::to_string(size.items_per_class + size.validation_per_class) +
            " distinct base images of each of their labels, but the base split has " +
            std::to_string(fit) + " of label " + std::to_string(size.scarcest_label) +
            ": layout hib-scaled keeps Table 3's " + std::to_string(classes.size()) +
            " classes with fewer items per class, or ask for fewer (" +
            (training ? "train_total" : "test_total") + ")");
      }
    } else {
      int64_t per_class = 0;
      HEDGEDB_RETURN_IF_ERROR(ChooseSplitClasses(split.name, *split.candidates, split.total,
                                                 config.min_items_per_class, &rng, &classes,
                                                 &per_class));
      size.requested_per_class = per_class;
      size.items_per_class = per_class;
      if (training) size.validation_per_class = config.validation_items_per_class;
      ScarcestLabel(classes, *split.by_label, n, k, &size.scarcest_label, &size.scarcest_count);
    }
    size.classes = static_cast<int64_t>(classes.size());
    if (training && classes.size() < out.train_classes.size()) {
      // Training classes are those that carry training items; any class
      // dropped by the min_items_per_class floor is never trained on, so it
      // is unseen.
      std::vector<int64_t> dropped;
      std::set_difference(out.train_classes.begin(), out.train_classes.end(), classes.begin(),
                          classes.end(), std::back_inserter(dropped));
      out.unseen_classes.insert(out.unseen_classes.end(), dropped.begin(), dropped.end());
      std::sort(out.unseen_classes.begin(), out.unseen_classes.end());
      out.train_classes = classes;
    }
    HEDGEDB_RETURN_IF_ERROR(FillItems(split.name, classes, size.items_per_class,
                                      size.validation_per_class, *split.by_label, n, k, &rng,
                                      split.set, split.validation));
    out.sizes.push_back(size);
  }
  // Stored occlusions: the corrupt twins of the test sets and the fixed
  // occlusions of the validation set.
  struct Occluded {
    CompositeSet* set;
    double probability;
    RandomStream stream;
  };
  for (const Occluded& o :
       {Occluded{&out.validation, config.train_occlusion_probability, kValidationOcclusionStream},
        Occluded{&out.test_seen, config.corrupt_occlusion_probability, kTestSeenOcclusionStream},
        Occluded{&out.test_unseen, config.corrupt_occlusion_probability,
                 kTestUnseenOcclusionStream}}) {
    SeededRng rng(SeededRng::DeriveSeed(config.seed, o.stream));
    for (int64_t item = 0; item < o.set->size(); ++item) {
      for (int p = 0; p < n; ++p) {
        OcclusionRect rect;
        if (rng.Bernoulli(o.probability)) {
          rect = DrawOcclusion(base_train->images.rows, base_train->images.cols, &rng);
        }
        o.set->SetStoredOcclusion(item, p, rect);
      }
    }
  }
  for (CompositeSet* set : {&out.train, &out.validation, &out.test_seen, &out.test_unseen}) {
    set->FinishClasses();
  }
  *composites = std::move(out);
  return Status::OK();
}

}  // namespace datasets
}  // namespace hedgedb
