// CUB-200-2011 reader on fixtures written in the official layout.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "datasets/benchmark_sets.h"
#include "datasets/image_set.h"
#include "datasets/load_data.h"
#include "encoders/embedder.h"
#include "encoders/eval/evaluation.h"
#include "encoders/train/trainer.h"
#include "temp_dir.h"

namespace hedgedb {
namespace datasets {
namespace {

namespace fs = std::filesystem;
using encoders::EncoderData;
using encoders::EncoderModel;
using encoders::EvaluateModel;
using encoders::EvaluationOptions;
using encoders::Method;
using encoders::Train;
using encoders::TrainOptions;
using encoders::TrainResult;

class CubTest : public testing_util::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root_ = Path("CUB_200_2011");
    // Two training classes (1, 2) and two test classes (101, 200); image 4
    // is a colour JPEG of 40 x 30 whose box is its left half.
    Write("images.txt",
          "1 001.Black_footed_Albatross/Black_Footed_Albatross_0001_796111.jpg\n"
          "2 001.Black_footed_Albatross/Black_Footed_Albatross_0002_55.jpg\n"
          "3 002.Laysan_Albatross/Laysan_Albatross_0001_545.jpg\n"
          "4 101.White_Pelican/White_Pelican_0001_97.jpg\n"
          "5 101.White_Pelican/White_Pelican_0002_96.jpg\n"
          "6 200.Common_Yellowthroat/Common_Yellowthroat_0003_190521.jpg\n");
    Write("image_class_labels.txt", "1 1\n2 1\n3 2\n4 101\n5 101\n6 200\n");
    Write("classes.txt",
          "1 001.Black_footed_Albatross\n2 002.Laysan_Albatross\n101 101.White_Pelican\n"
          "200 200.Common_Yellowthroat\n");
    Write("bounding_boxes.txt",
          "1 60.0 27.0 325.0 304.0\n2 139.0 30.0 153.0 264.0\n3 14.0 112.0 388.0 186.0\n"
          "4 0.0 0.0 20.0 30.0\n5 5.0 5.0 10.0 10.0\n6 1.5 2.5 30.0 20.0\n");
    std::vector<float> image(3 * 30 * 40);
    for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>(i % 7) / 7.0f;
    for (const char* f : {"101.White_Pelican/White_Pelican_0001_97.jpg",
                          "101.White_Pelican/White_Pelican_0002_96.jpg"}) {
      fs::create_directories(fs::path(root_) / "images" / fs::path(f).parent_path());
      ASSERT_TRUE(
          WriteImageFile((fs::path(root_) / "images" / f).string(), image.data(), 3, 30, 40).ok());
    }
  }

  void Write(const std::string& name, const std::string& text) const {
    fs::create_directories(root_);
    std::ofstream(fs::path(root_) / name, std::ios::binary | std::ios::trunc) << text;
  }

  Status Read(BenchmarkSplit split, ImageSource* source) const {
    return ReadCub200(root_, split, source);
  }

  // Expects a Corruption naming `file` and `needle`.
  void ExpectCorrupt(const std::string& file, const std::string& needle) const {
    ImageSource source;
    const Status s = Read(BenchmarkSplit::kAll, &source);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find(file), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  }

  std::string root_;
};

TEST_F(CubTest, SplitsByClassWithNamesPathsAndBoxes) {
  ImageSource train, test, all;
  ASSERT_TRUE(Read(BenchmarkSplit::kTrain, &train).ok());
  ASSERT_TRUE(Read(BenchmarkSplit::kTest, &test).ok());
  ASSERT_TRUE(Read(BenchmarkSplit::kAll, &all).ok());
  ASSERT_EQ(train.size(), 3);
  ASSERT_EQ(test.size(), 3);
  ASSERT_EQ(all.size(), 6);
  EXPECT_EQ(train.entries[2].label, 2);
  EXPECT_EQ(train.entries[2].label_name, "002.Laysan_Albatross");
  const ImageEntry& pelican = test.entries[0];
  EXPECT_TRUE(pelican.has_label);
  EXPECT_EQ(pelican.label, 101);
  EXPECT_EQ(pelican.label_name, "101.White_Pelican");
  EXPECT_TRUE(fs::path(pelican.path).is_absolute());
  EXPECT_EQ(pelican.path,
            (fs::path(root_) / "images/101.White_Pelican/White_Pelican_0001_97.jpg").string());
  EXPECT_TRUE(fs::exists(pelican.path));
  ASSERT_TRUE(test.entries[2].has_box);
  EXPECT_DOUBLE_EQ(test.entries[2].box.x, 1.5);
  EXPECT_DOUBLE_EQ(test.entries[2].box.y, 2.5);
  EXPECT_DOUBLE_EQ(test.entries[2].box.width, 30.0);
  EXPECT_DOUBLE_EQ(test.entries[2].box.height, 20.0);
  EXPECT_EQ(test.entries[2].label, 200);

  BenchmarkSplit split;
  ASSERT_TRUE(ParseBenchmarkSplit("test", &split));
  EXPECT_EQ(split, BenchmarkSplit::kTest);
  EXPECT_FALSE(ParseBenchmarkSplit("validation", &split));
}

// The parser behind ReadCub200 works on the files' contents alone (the fuzz
// target drives it from memory): same entries, and errors still name the file.
TEST_F(CubTest, ParsesTheSameFromMemory) {
  auto slurp = [&](const char* name) {
    std::ifstream in(fs::path(root_) / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CubAnnotations files;
  files.images = slurp("images.txt");
  files.image_class_labels = slurp("image_class_labels.txt");
  files.bounding_boxes = slurp("bounding_boxes.txt");
  files.has_classes = true;
  files.classes = slurp("classes.txt");
  ImageSource from_files, from_memory;
  ASSERT_TRUE(Read(BenchmarkSplit::kAll, &from_files).ok());
  ASSERT_TRUE(ParseCub200(root_, files, BenchmarkSplit::kAll, &from_memory).ok());
  ASSERT_EQ(from_memory.size(), from_files.size());
  for (int64_t i = 0; i < from_files.size(); ++i) {
    EXPECT_EQ(from_memory.entries[size_t(i)].path, from_files.entries[size_t(i)].path);
    EXPECT_EQ(from_memory.entries[size_t(i)].label, from_files.entries[size_t(i)].label);
    EXPECT_EQ(from_memory.entries[size_t(i)].label_name, from_files.entries[size_t(i)].label_name);
    EXPECT_EQ(from_memory.entries[size_t(i)].box.width, from_files.entries[size_t(i)].box.width);
  }
  files.bounding_boxes = "1 60.0 27.0 325.0\n";
  const Status s = ParseCub200(root_, files, BenchmarkSplit::kAll, &from_memory);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("bounding_boxes.txt line 1"), std::string::npos) << s.ToString();
}

TEST_F(CubTest, CropsToTheBoundingBoxWhenAsked) {
  ImageSource test;
  ASSERT_TRUE(Read(BenchmarkSplit::kTest, &test).ok());
  // Keep only the two images that exist; decode at their own size.
  test.entries.resize(2);
  ImageInputOptions options;
  options.input_shape = {3, 30, 40};
  DecodedImages whole, cropped;
  ASSERT_TRUE(DecodeImages(test, 0, 2, options, &whole).ok());
  EXPECT_EQ(whole.size(), 2) << (whole.errors.empty() ? "" : whole.errors[0].message);
  // Cropped to a 20 x 30 box, then fitted to 10 x 15 (the box's aspect):
  // the left half of the image, so not the whole image's resize.
  options.input_shape = {3, 15, 10};
  options.fit = ImageFit::kResize;
  options.crop_to_box = true;
  ASSERT_TRUE(DecodeImages(test, 0, 1, options, &cropped).ok());
  ASSERT_EQ(cropped.size(), 1) << (cropped.errors.empty() ? "" : cropped.errors[0].message);
  options.crop_to_box = false;
  DecodedImages resized;
  ASSERT_TRUE(DecodeImages(test, 0, 1, options, &resized).ok());
  ASSERT_EQ(resized.size(), 1);
  EXPECT_NE(cropped.pixels, resized.pixels);

  // Cropped without resizing (kExact at the box's size): exactly the left
  // 20 columns of the whole image.
  options.input_shape = {3, 30, 20};
  options.fit = ImageFit::kExact;
  options.crop_to_box = true;
  DecodedImages half;
  ASSERT_TRUE(DecodeImages(test, 0, 1, options, &half).ok());
  ASSERT_EQ(half.size(), 1) << (half.errors.empty() ? "" : half.errors[0].message);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 30; ++y) {
      for (int x = 0; x < 20; ++x) {
        ASSERT_EQ(half.pixels[(c * 30 + y) * 20 + x], whole.pixels[(c * 30 + y) * 40 + x])
            << c << " " << y << " " << x;
      }
    }
  }

  // A box that misses the image is an error naming the file.
  test.entries[0].box = {100, 100, 5, 5};
  options.crop_to_box = true;
  DecodedImages missed;
  ASSERT_TRUE(DecodeImages(test, 0, 1, options, &missed).ok());
  ASSERT_EQ(missed.errors.size(), 1u);
  EXPECT_NE(missed.errors[0].message.find("White_Pelican_0001_97.jpg"), std::string::npos);
  EXPECT_NE(missed.errors[0].message.find("bounding box"), std::string::npos)
      << missed.errors[0].message;
}

TEST_F(CubTest, MissingRootOrFilesAreNotFound) {
  ImageSource source;
  Status s = ReadCub200(Path("nowhere"), BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  fs::remove(fs::path(root_) / "bounding_boxes.txt");
  s = Read(BenchmarkSplit::kAll, &source);
  ASSERT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("bounding_boxes.txt"), std::string::npos) << s.ToString();
}

TEST_F(CubTest, MalformedAnnotationsNameTheFileAndLine) {
  Write("image_class_labels.txt", "1 1\n2 1\n3 2\n4 101\n5 101\n");
  ExpectCorrupt("image_class_labels.txt", "no class for image 6");
  Write("image_class_labels.txt", "1 1\n2 1\n3 2\n4 101\n5 101\n6 201\n");
  ExpectCorrupt("image_class_labels.txt", "201");
  Write("image_class_labels.txt", "1 1\n2 1\n3 2\n4 101\n5 101\n6 200\n");
  Write("bounding_boxes.txt", "1 60.0 27.0 325.0\n");
  ExpectCorrupt("bounding_boxes.txt", "line 1");
  Write("bounding_boxes.txt", "1 60.0 27.0 0 304.0\n");
  ExpectCorrupt("bounding_boxes.txt", "empty");
  Write("bounding_boxes.txt", "1 60.0 27.0 325.0 304.0\n");
  ExpectCorrupt("bounding_boxes.txt", "no bounding box for image 2");
  Write("bounding_boxes.txt", "1 1 1 5 5\n1 2 2 5 5\n");
  ExpectCorrupt("bounding_boxes.txt", "second bounding box");
  Write("bounding_boxes.txt", "1 1 1 5 5\n2 1 1 5 5\n3 1 1 5 5\n4 1 1 5 5\n5 1 1 5 5\n6 1 1 5 5\n");
  Write("images.txt", "1 ../../etc/passwd\n2 a.jpg\n3 b.jpg\n4 c.jpg\n5 d.jpg\n6 e.jpg\n");
  ExpectCorrupt("images.txt", "not inside the data set root");
  Write("images.txt", "1 /etc/passwd\n2 a.jpg\n3 b.jpg\n4 c.jpg\n5 d.jpg\n6 e.jpg\n");
  ExpectCorrupt("images.txt", "not inside the data set root");
  Write("images.txt", "x 001.a/b.jpg\n");
  ExpectCorrupt("images.txt", "line 1");
  Write("images.txt", "1 a.jpg\n1 b.jpg\n");
  ExpectCorrupt("images.txt", "twice");
}

// A larger fixture: 4 training and 4 test classes of 6 colour JPEGs whose hue
// depends on the class, read as `--data cub:ROOT`, trained on and evaluated.
TEST_F(CubTest, TrainsAndEvaluatesOnTheClassDisjointSplit) {
  std::string images, labels, boxes, names;
  int id = 0;
  for (int label : {1, 2, 3, 4, 101, 102, 103, 104}) {
    const std::string name =
        std::to_string(1000 + label).substr(1) + ".Bird_" + std::to_string(label);
    names += std::to_string(label) + " " + name + "\n";
    for (int i = 0; i < 6; ++i) {
      ++id;
      const std::string relative = name + "/img_" + std::to_string(id) + ".jpg";
      std::vector<float> pixels(3 * 24 * 32);
      for (size_t p = 0; p < pixels.size(); ++p) {
        const int channel = static_cast<int>(p / (24 * 32));
        pixels[p] = 0.2f + 0.6f * ((label + channel) % 4) / 3.0f + 0.05f * ((p * 7 + id) % 5);
      }
      fs::create_directories(fs::path(root_) / "images" / name);
      ASSERT_TRUE(
          WriteImageFile((fs::path(root_) / "images" / relative).string(), pixels.data(), 3, 24, 32)
              .ok());
      images += std::to_string(id) + " " + relative + "\n";
      labels += std::to_string(id) + " " + std::to_string(label) + "\n";
      boxes += std::to_string(id) + " 2.0 2.0 28.0 20.0\n";
    }
  }
  Write("images.txt", images);
  Write("image_class_labels.txt", labels);
  Write("bounding_boxes.txt", boxes);
  Write("classes.txt", names);

  DataOptions d;
  d.source = "cub:" + root_;
  d.image_size = 16;
  d.bbox = true;
  d.val_fraction = 0.34;
  EncoderData data;
  Status s = LoadEncoderData(d, &data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(data.train.size() + data.validation.size(), 24);
  // 2 of each training class: validation ranks 7 items, fewer than recall@8
  // needs, so it reports the cut-offs it can.
  EXPECT_EQ(data.validation.size(), 8);
  EXPECT_EQ(data.test.size(), 24);
  EXPECT_EQ(data.num_train_classes, 4);
  EXPECT_FALSE(data.has_corrupt);
  EXPECT_EQ(data.train.input_shape, (std::vector<int64_t>{3, 16, 16}));
  ASSERT_EQ(data.input_mean.size(), 3u);

  TrainOptions t;
  t.method = Method::kHib;
  t.out = Path("cub.model");
  t.iterations = 20;
  t.batch_size = 16;
  t.threads = 1;
  t.cnn_conv1 = 4;
  t.cnn_conv2 = 4;
  t.cnn_hidden = 16;
  t.eval_every = 10;
  t.val_items = 8;
  t.progress_seconds = 1e9;
  t.log = [](const std::string&) {};
  TrainResult result;
  s = Train(t, data, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.spec.input_shape, (std::vector<int64_t>{3, 16, 16}));

  std::unique_ptr<EncoderModel> model;
  ASSERT_TRUE(EncoderModel::Load(t.out, &model).ok());
  EvaluationOptions eval;
  eval.verification_pairs = 100;
  nlohmann::json report;
  s = EvaluateModel(*model, data, eval, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const nlohmann::json& clean = report["retrieval"]["clean"];
  for (const char* key : {"recall_at_1", "recall_at_2", "recall_at_4", "recall_at_8"}) {
    ASSERT_TRUE(clean.contains(key)) << clean;
    EXPECT_GE(clean[key].get<double>(), 0.0);
  }
  EXPECT_EQ(clean["queries"], 24);

  // A test image that cannot be decoded fails the data set, naming it.
  std::ofstream(fs::path(root_) / "images" / "101.Bird_101" / "img_25.jpg", std::ios::trunc)
      << "not a jpeg";
  s = LoadEncoderData(d, &data);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("img_25.jpg"), std::string::npos) << s.ToString();
  d.image_size = 4;
  EXPECT_TRUE(LoadEncoderData(d, &data).IsInvalidArgument());
}

}  // namespace
}  // namespace datasets
}  // namespace hedgedb
