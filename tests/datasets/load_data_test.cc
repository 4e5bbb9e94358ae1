// The loader's errors (datasets/load_data.h) name the DataOptions field at
// fault, and the composite builder's the CompositeConfig field, as a C++ or
// Python caller sets them: never a command-line flag. The CLI names its flags
// instead (tools/cli_util.cc, WithFlags; tests/cli/encoder_cli_test.cc,
// DataErrorsNameTheFlags).
#include "datasets/load_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "temp_dir.h"

namespace hedgedb {
namespace datasets {
namespace {

using encoders::EncoderData;

class LoadDataTest : public testing_util::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // An MNIST-layout directory: 30 images of each label 0-9 per split, so
    // that two-item composites of a few hundred items fit and 100000 do not.
    LabeledImages split;
    split.images.rows = 4;
    split.images.cols = 4;
    for (int64_t label = 0; label < 10; ++label) {
      for (int i = 0; i < 30; ++i) {
        split.labels.push_back(label);
        for (int p = 0; p < 16; ++p)
          split.images.pixels.push_back(static_cast<uint8_t>(1 + (label + i + p) % 250));
      }
    }
    split.images.count = static_cast<int64_t>(split.labels.size());
    for (const char* prefix : {"train", "t10k"}) {
      ASSERT_TRUE(
          WriteIdxImages(Path(std::string(prefix) + "-images-idx3-ubyte"), split.images, false)
              .ok());
      ASSERT_TRUE(
          WriteIdxLabels(Path(std::string(prefix) + "-labels-idx1-ubyte"), split.labels, false)
              .ok());
    }
  }

  // Options that load: 2-item composites of the directory above.
  DataOptions Good() const {
    DataOptions options;
    options.source = "idx:" + dir_;
    options.items = 2;
    options.train_total = 700;
    options.test_total = 200;
    return options;
  }
};

TEST_F(LoadDataTest, ErrorsNameTheOptionNotAFlag) {
  EncoderData data;
  const Status good = LoadEncoderData(Good(), &data);
  ASSERT_TRUE(good.ok()) << good.ToString();

  struct Case {
    std::function<void(DataOptions*)> set;
    std::string text;
  };
  const std::vector<Case> cases = {
      {[](DataOptions* o) { o->val_fraction = 1.0; }, "val_fraction must be in [0, 1)"},
      {[](DataOptions* o) { o->val_fraction = -0.1; }, "val_fraction must be in [0, 1)"},
      {[](DataOptions* o) { o->val_fraction = std::nan(""); }, "val_fraction must be in [0, 1)"},
      {[](DataOptions* o) { o->items = 5; }, "items must be in [1, 4], got 5"},
      {[](DataOptions* o) { o->composite_layout = "table3"; },
       "composite_layout must be reference, hib or hib-scaled, got 'table3'"},
      {[](DataOptions* o) { o->train_occlusion = 1.5; }, "train_occlusion must be in [0, 1]"},
      // The composite builder names CompositeConfig's fields.
      {[](DataOptions* o) { o->train_total = 100000; },
       "ask for fewer (train_total, test_total), or fewer positions (num_positions)"},
      {[](DataOptions* o) {
         o->items = 1;
         o->composite_layout = "hib";
       },
       "use layout reference (the reference generator's rule)"},
      {[](DataOptions* o) {
         o->composite_layout = "hib";
         o->train_total = 7000;
       },
       ": layout hib-scaled keeps Table 3's 70 classes with fewer items per class, or ask for "
       "fewer (train_total)"},
      // Sources, and the options of image data sets.
      {[](DataOptions* o) { o->source = "idx:"; }, "source idx:DIR needs a directory"},
      {[](DataOptions* o) { o->source = "cub:"; }, "source cub:ROOT needs a directory"},
      {[](DataOptions* o) { o->source = "features:only.npy"; },
       "source features:FEATS.npy,LABELS.npy needs two files, got 'only.npy'"},
      {[](DataOptions* o) {
         o->source = "cars:/nowhere";
         o->image_size = 4;
       },
       "image_size must be in [8, 1024], got 4"},
      {[](DataOptions* o) {
         o->source = "folder:/nowhere";
         o->bbox = true;
       },
       "bbox needs annotated boxes"},
      {[](DataOptions* o) { o->bbox = true; },
       "bbox applies to cub:ROOT, cars:ROOT and folder:ROOT"},
      {[](DataOptions* o) { o->class_split = 3; },
       "class_split applies to cub:ROOT, cars:ROOT and folder:ROOT"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    DataOptions options = Good();
    c.set(&options);
    const Status s = LoadEncoderData(options, &data);
    ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(c.text), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace datasets
}  // namespace hedgedb
