#include "datasets/load_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "datasets/benchmark_sets.h"
#include "datasets/composite_dataset.h"
#include "datasets/idx_reader.h"
#include "datasets/image_set.h"
#include "encoders/data/features_dataset.h"

namespace hedgedb {
namespace datasets {

using encoders::DataFamily;
using encoders::DataSettings;
using encoders::EncoderData;
using encoders::FeaturesDataset;
using encoders::ItemSet;
using encoders::LoadFeaturesDataset;
using encoders::SeededRng;

namespace {

constexpr const char kMnistDefaultDir[] = "/usr/share/datasets/mnist";

ItemSet CompositeItemSet(std::shared_ptr<const CompositeSet> set, double train_occlusion) {
  ItemSet items;
  items.labels = set->labels();
  items.input_shape = {1, set->rows(), set->cols()};
  items.render = [set](const std::vector<int64_t>& idx, bool corrupt, float* out) {
    set->RenderBatchFloat(
        idx, corrupt ? CompositeSet::Variant::kStored : CompositeSet::Variant::kClean, out);
  };
  items.render_train = [set, train_occlusion](const std::vector<int64_t>& idx, SeededRng* rng,
                                              float* out) {
    set->RenderBatchFloatRandom(idx, train_occlusion, rng, out);
  };
  return items;
}

// The union of two composite sets (HIB's test set has seen and unseen classes).
ItemSet ConcatItemSets(const ItemSet& first, const ItemSet& second) {
  ItemSet items;
  items.labels = first.labels;
  items.labels.insert(items.labels.end(), second.labels.begin(), second.labels.end());
  items.input_shape = first.input_shape;
  const int64_t split = first.size();
  const int64_t floats = first.item_floats();
  auto route = [split, floats](const std::vector<int64_t>& idx, float* out, const auto& a,
                               const auto& b) {
    std::vector<int64_t> lo, hi;
    std::vector<size_t> lo_pos, hi_pos;
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < split) {
        lo.push_back(idx[i]);
        lo_pos.push_back(i);
      } else {
        hi.push_back(idx[i] - split);
        hi_pos.push_back(i);
      }
    }
    std::vector<float> buf;
    for (int part = 0; part < 2; ++part) {
      const std::vector<int64_t>& sub = part == 0 ? lo : hi;
      const std::vector<size_t>& pos = part == 0 ? lo_pos : hi_pos;
      if (sub.empty()) continue;
      buf.resize(sub.size() * floats);
      if (part == 0) {
        a(sub, buf.data());
      } else {
        b(sub, buf.data());
      }
      for (size_t i = 0; i < sub.size(); ++i) {
        std::copy(buf.begin() + i * floats, buf.begin() + (i + 1) * floats, out + pos[i] * floats);
      }
    }
  };
  auto r1 = first.render, r2 = second.render;
  items.render = [route, r1, r2](const std::vector<int64_t>& idx, bool corrupt, float* out) {
    route(
        idx, out, [&](const std::vector<int64_t>& s, float* o) { r1(s, corrupt, o); },
        [&](const std::vector<int64_t>& s, float* o) { r2(s, corrupt, o); });
  };
  auto t1 = first.render_train, t2 = second.render_train;
  items.render_train = [route, t1, t2](const std::vector<int64_t>& idx, SeededRng* rng,
                                       float* out) {
    route(
        idx, out, [&](const std::vector<int64_t>& s, float* o) { t1(s, rng, o); },
        [&](const std::vector<int64_t>& s, float* o) { t2(s, rng, o); });
  };
  return items;
}

ItemSet FeatureItemSet(std::shared_ptr<const FeaturesDataset> features, std::vector<int64_t> rows) {
  ItemSet items;
  for (int64_t r : rows) items.labels.push_back(features->labels[r]);
  items.input_shape = {features->dim};
  auto shared_rows = std::make_shared<const std::vector<int64_t>>(std::move(rows));
  items.render = [features, shared_rows](const std::vector<int64_t>& idx, bool, float* out) {
    const int64_t dim = features->dim;
    for (size_t i = 0; i < idx.size(); ++i) {
      const float* row = features->row((*shared_rows)[idx[i]]);
      std::copy(row, row + dim, out + i * dim);
    }
  };
  auto render = items.render;
  items.render_train = [render](const std::vector<int64_t>& idx, SeededRng*, float* out) {
    render(idx, false, out);
  };
  return items;
}

Status LoadImageData(const std::string& dir, const std::string& name, const DataOptions& options,
                     EncoderData* data) {
  if (options.items < 1 || options.items > 4) {
    return Status::InvalidArgument("items must be in [1, 4], got " + std::to_string(options.items));
  }
  // The options first: a bad one is named before any file is read.
  CompositeConfig config;
  if (!ParseCompositeLayout(options.composite_layout, &config.layout)) {
    return Status::InvalidArgument("composite_layout must be reference, hib or hib-scaled, got '" +
                                   options.composite_layout + "'");
  }
  ImageSplits splits;
  HEDGEDB_RETURN_IF_ERROR(LoadMnistLayoutDir(dir, &splits));
  int64_t max_label = 0;
  for (const auto* labels : {&splits.train.labels, &splits.test.labels}) {
    for (int64_t l : *labels) max_label = std::max(max_label, l);
  }
  config.num_positions = options.items;
  config.num_base_classes = static_cast<int>(max_label + 1);
  config.train_total = options.train_total;
  config.test_total = options.test_total;
  // The reference generator's floor of 100 items per test class, lowered for
  // small (test-sized) data sets so that every class still has a few items.
  config.min_items_per_class = std::max<int64_t>(
      2, std::min<int64_t>(100, std::min(options.test_total, options.train_total) / 100));
  config.seed = options.seed;
  if (config.layout != CompositeLayout::kReference) {
    // The builder sizes the validation items after any scaling.
    config.validation_fraction = options.val_fraction;
  } else if (options.val_fraction > 0) {
    int64_t classes = 1;
    for (int i = 0; i < options.items; ++i) classes *= config.num_base_classes;
    const int64_t train_classes =
        std::max<int64_t>(1, static_cast<int64_t>(classes * config.train_class_fraction));
    const int64_t per_class =
        std::max(config.min_items_per_class, options.train_total / train_classes);
    config.validation_items_per_class = ValidationItemsFor(per_class, options.val_fraction);
  }
  auto base_train = std::make_shared<const LabeledImages>(std::move(splits.train));
  auto base_test = std::make_shared<const LabeledImages>(std::move(splits.test));
  NDigitComposites composites;
  HEDGEDB_RETURN_IF_ERROR(BuildNDigitComposites(config, base_train, base_test, &composites));

  // Pixel statistics of the base training images: the input normalisation.
  double sum = 0, sum_sq = 0;
  for (uint8_t p : base_train->images.pixels) {
    const double v = p / 255.0;
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(base_train->images.pixels.size());
  const double mean = sum / n;
  const double var = std::max(sum_sq / n - mean * mean, 1e-12);
  data->input_mean = {mean};
  data->input_std = {std::sqrt(var)};

  if (!(options.train_occlusion >= 0 && options.train_occlusion <= 1)) {
    return Status::InvalidArgument("train_occlusion must be in [0, 1]");
  }
  const double p = options.train_occlusion;
  data->description = name + " " + std::to_string(options.items) + "-item composites";
  if (config.layout != CompositeLayout::kReference) {
    // What a reader needs to hold the numbers against HIB's: the layout and
    // every split's classes x items, naming what was scaled and why.
    data->description += std::string(" (") + CompositeLayoutName(config.layout) +
                         " layout: " + DescribeCompositeSizes(composites) + ")";
  }
  data->has_corrupt = true;
  data->factor_sizes.assign(static_cast<size_t>(options.items), config.num_base_classes);
  data->num_train_classes = static_cast<int64_t>(composites.train_classes.size());
  data->train = CompositeItemSet(std::make_shared<const CompositeSet>(composites.train), p);
  if (composites.validation.size() > 0) {
    data->validation =
        CompositeItemSet(std::make_shared<const CompositeSet>(composites.validation), p);
  }
  data->test_seen = CompositeItemSet(std::make_shared<const CompositeSet>(composites.test_seen), p);
  data->test_unseen =
      CompositeItemSet(std::make_shared<const CompositeSet>(composites.test_unseen), p);
  data->test = ConcatItemSets(data->test_seen, data->test_unseen);
  return Status::OK();
}

// Holds out a seeded share `fraction` of a training class's rows for
// validation (at least 2 and at most all but 2, and only from classes with
// at least 4 rows); the rest train. Appends to both lists (sorted by the caller).
void HoldOutValidation(std::vector<int64_t> rows, double fraction, SeededRng* rng,
                       std::vector<int64_t>* train_rows, std::vector<int64_t>* val_rows) {
  // At least 2 (a validation pair), and at least 2 left to train on.
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t hold = fraction > 0 && n >= 4
                           ? std::min(n - 2, std::max<int64_t>(2, std::llround(n * fraction)))
                           : 0;
  rng->Shuffle(&rows);
  val_rows->insert(val_rows->end(), rows.begin(), rows.begin() + hold);
  train_rows->insert(train_rows->end(), rows.begin() + hold, rows.end());
}

Status LoadFeatureData(const std::string& spec, const DataOptions& options, EncoderData* data) {
  const size_t comma = spec.find(',');
  if (comma == std::string::npos || comma == 0 || comma + 1 == spec.size()) {
    return Status::InvalidArgument("source features:FEATS.npy,LABELS.npy needs two files, got '" +
                                   spec + "'");
  }
  auto features = std::make_shared<FeaturesDataset>();
  HEDGEDB_RETURN_IF_ERROR(
      LoadFeaturesDataset(spec.substr(0, comma), spec.substr(comma + 1), features.get()));
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < features->count; ++i) by_class[features->labels[i]].push_back(i);
  if (by_class.size() < 4) {
    return Status::InvalidArgument(
        "features: need at least 4 classes (half train, half test), got " +
        std::to_string(by_class.size()));
  }
  const size_t num_train = by_class.size() / 2;
  std::vector<int64_t> train_rows, val_rows, test_rows;
  SeededRng rng(SeededRng::DeriveSeed(options.seed, 0x7661));
  size_t slot = 0;
  for (auto& [label, rows] : by_class) {
    if (slot++ >= num_train) {
      test_rows.insert(test_rows.end(), rows.begin(), rows.end());
      continue;
    }
    HoldOutValidation(rows, options.val_fraction, &rng, &train_rows, &val_rows);
  }
  std::sort(train_rows.begin(), train_rows.end());
  std::sort(val_rows.begin(), val_rows.end());
  // Per-feature standardisation from the training rows.
  const int64_t dim = features->dim;
  std::vector<double> sum(dim, 0.0), sum_sq(dim, 0.0);
  for (int64_t r : train_rows) {
    const float* row = features->row(r);
    for (int64_t j = 0; j < dim; ++j) {
      sum[j] += row[j];
      sum_sq[j] += static_cast<double>(row[j]) * row[j];
    }
  }
  data->input_mean.assign(dim, 0.0);
  data->input_std.assign(dim, 1.0);
  const double n = static_cast<double>(train_rows.size());
  for (int64_t j = 0; j < dim; ++j) {
    const double mean = sum[j] / n;
    const double var = sum_sq[j] / n - mean * mean;
    data->input_mean[j] = mean;
    // Constant features keep std 1: dividing by ~0 would only amplify noise.
    data->input_std[j] = var > 1e-12 ? std::sqrt(var) : 1.0;
  }
  std::shared_ptr<const FeaturesDataset> shared = features;
  data->description =
      "features (" + std::to_string(features->count) + " x " + std::to_string(dim) + ")";
  data->has_corrupt = false;
  data->num_train_classes = static_cast<int64_t>(num_train);
  data->train = FeatureItemSet(shared, train_rows);
  if (!val_rows.empty()) data->validation = FeatureItemSet(shared, val_rows);
  data->test = FeatureItemSet(shared, test_rows);
  data->test_unseen = data->test;  // every test class is unseen; none is seen
  return Status::OK();
}

// Decodes every entry of `source`; the first failure (and how many more)
// is the error: a data set for training is all or nothing.
Status DecodeAll(const ImageSource& source, const ImageInputOptions& input,
                 std::shared_ptr<const DecodedImages>* out) {
  auto decoded = std::make_shared<DecodedImages>();
  HEDGEDB_RETURN_IF_ERROR(DecodeImages(source, 0, source.size(), input, decoded.get()));
  if (!decoded->errors.empty()) {
    std::string message = decoded->errors.front().message;
    if (decoded->errors.size() > 1) {
      message += " (and " + std::to_string(decoded->errors.size() - 1) + " more images)";
    }
    return Status::Corruption(message);
  }
  *out = std::move(decoded);
  return Status::OK();
}

Status LoadBenchmarkImageData(const std::string& name, const std::string& root,
                              const DataOptions& options, EncoderData* data) {
  if (root.empty()) return Status::InvalidArgument("source " + name + ":ROOT needs a directory");
  if (options.image_size < 8 || options.image_size > 1024) {
    return Status::InvalidArgument("image_size must be in [8, 1024], got " +
                                   std::to_string(options.image_size));
  }
  if (options.bbox && name == "folder") {
    return Status::InvalidArgument("bbox needs annotated boxes; an image folder has none");
  }
  ImageSource train_all, test;
  HEDGEDB_RETURN_IF_ERROR(
      ReadBenchmarkSet(name, root, BenchmarkSplit::kTrain, &train_all, options.class_split));
  HEDGEDB_RETURN_IF_ERROR(
      ReadBenchmarkSet(name, root, BenchmarkSplit::kTest, &test, options.class_split));
  // Validation: a seeded share of every training class.
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < train_all.size(); ++i) {
    by_class[train_all.entries[i].label].push_back(i);
  }
  std::vector<int64_t> train_rows, val_rows;
  SeededRng rng(SeededRng::DeriveSeed(options.seed, 0x7662));
  for (const auto& [label, rows] : by_class) {
    HoldOutValidation(rows, options.val_fraction, &rng, &train_rows, &val_rows);
  }
  std::sort(train_rows.begin(), train_rows.end());
  std::sort(val_rows.begin(), val_rows.end());
  auto subset = [&](const std::vector<int64_t>& rows) {
    ImageSource s;
    for (int64_t r : rows) s.entries.push_back(train_all.entries[r]);
    return s;
  };
  const ImageSource train = subset(train_rows), validation = subset(val_rows);

  ImageInputOptions input;
  input.input_shape = {3, options.image_size, options.image_size};
  input.fit = ImageFit::kResize;
  input.crop_to_box = options.bbox;
  std::shared_ptr<const DecodedImages> train_images, val_images, test_images;
  HEDGEDB_RETURN_IF_ERROR(DecodeAll(train, input, &train_images));
  if (validation.size() > 0) HEDGEDB_RETURN_IF_ERROR(DecodeAll(validation, input, &val_images));
  HEDGEDB_RETURN_IF_ERROR(DecodeAll(test, input, &test_images));

  // Per-channel pixel statistics of the training images: the normalisation.
  const int64_t plane = options.image_size * options.image_size;
  data->input_mean.assign(3, 0.0);
  data->input_std.assign(3, 1.0);
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < train_images->size(); ++i) {
      const float* p = train_images->pixels.data() + (i * 3 + c) * plane;
      for (int64_t j = 0; j < plane; ++j) {
        sum += p[j];
        sum_sq += static_cast<double>(p[j]) * p[j];
      }
    }
    const double n = static_cast<double>(train_images->size() * plane);
    const double mean = sum / n;
    data->input_mean[c] = mean;
    data->input_std[c] = std::sqrt(std::max(sum_sq / n - mean * mean, 1e-12));
  }
  data->description = (name == "cub"    ? "CUB-200-2011 "
                       : name == "cars" ? "Cars-196 "
                                        : "image folder " + root + " ") +
                      std::string("(") + std::to_string(options.image_size) + " x " +
                      std::to_string(options.image_size) + (options.bbox ? ", boxes" : "") + ")";
  data->has_corrupt = false;
  data->num_train_classes = static_cast<int64_t>(by_class.size());
  data->train = DecodedImageItemSet(train_images, train);
  if (val_images) data->validation = DecodedImageItemSet(val_images, validation);
  data->test = DecodedImageItemSet(test_images, test);
  data->test_unseen = data->test;  // every test class is unseen; none is seen
  return Status::OK();
}

Status LoadEncoderDataOnly(const DataOptions& options, EncoderData* data) {
  *data = EncoderData();
  const std::string& source = options.source;
  if (options.train_total < 1 || options.test_total < 1) {
    return Status::InvalidArgument("data set sizes must be >= 1");
  }
  // Every source holds out val_fraction of its training items.
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return Status::InvalidArgument("val_fraction must be in [0, 1)");
  }
  const bool benchmark = std::string(DataFamily(source)) == "benchmark";
  if (!benchmark &&
      (options.bbox || options.image_size != DataOptions().image_size || options.class_split)) {
    return Status::InvalidArgument(std::string(options.bbox               ? "bbox"
                                               : options.class_split != 0 ? "class_split"
                                                                          : "image_size") +
                                   " applies to cub:ROOT, cars:ROOT and folder:ROOT data only, "
                                   "not '" +
                                   source + "'");
  }
  if (source == "fashion-mnist") {
    return LoadImageData(kFashionMnistDefaultDir, "fashion-mnist", options, data);
  }
  if (source == "mnist") {
    const char* env = std::getenv("HEDGEDB_MNIST_DIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : kMnistDefaultDir;
    return LoadImageData(dir, "mnist", options, data);
  }
  if (source.rfind("idx:", 0) == 0) {
    const std::string dir = source.substr(4);
    if (dir.empty()) return Status::InvalidArgument("source idx:DIR needs a directory");
    return LoadImageData(dir, "idx:" + dir, options, data);
  }
  if (source.rfind("features:", 0) == 0) {
    return LoadFeatureData(source.substr(9), options, data);
  }
  for (const char* name : {"cub", "cars", "folder"}) {
    const std::string prefix = std::string(name) + ":";
    if (source.rfind(prefix, 0) == 0) {
      return LoadBenchmarkImageData(name, source.substr(prefix.size()), options, data);
    }
  }
  return Status::InvalidArgument("unknown data source '" + source +
                                 "' (expected fashion-mnist, mnist, idx:DIR, cub:ROOT, cars:ROOT, "
                                 "folder:ROOT or features:FEATS.npy,LABELS.npy)");
}

// `source` with the paths it names made absolute, so that a model file
// records data it can find from any working directory.
std::string AbsoluteSource(const std::string& source) {
  const size_t colon = source.find(':');
  if (colon == std::string::npos) return source;  // fashion-mnist, mnist
  std::string out = source.substr(0, colon + 1);
  // features: names two files; the other sources one path (which may hold a
  // comma).
  const char separator = source.rfind("features:", 0) == 0 ? ',' : '\0';
  std::stringstream paths(source.substr(colon + 1));
  std::string path;
  for (bool first = true; std::getline(paths, path, separator); first = false) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    out += (first ? "" : ",") + (ec || path.empty() ? path : absolute.lexically_normal().string());
  }
  return out;
}

}  // namespace

DataSettings SettingsOf(const DataOptions& options) {
  DataSettings s;
  s.recorded = true;
  s.source = AbsoluteSource(options.source);
  s.seed = options.seed;
  const std::string family = DataFamily(options.source);
  if (family == "composites") {
    s.items = options.items;
    s.composite_layout = options.composite_layout;
    s.train_total = options.train_total;
    s.test_total = options.test_total;
    s.image_fit = "exact";
  } else if (family == "benchmark") {
    s.image_size = options.image_size;
    s.bbox = options.bbox;
    s.class_split = options.class_split;
    s.image_fit = "resize";
  }
  return s;
}

Status LoadEncoderData(const DataOptions& options, EncoderData* data) {
  HEDGEDB_RETURN_IF_ERROR(LoadEncoderDataOnly(options, data));
  data->settings = SettingsOf(options);
  return Status::OK();
}

}  // namespace datasets
}  // namespace hedgedb
