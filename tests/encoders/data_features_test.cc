#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "encoders/data/features_dataset.h"
#include "hedgedb/npy.h"
#include "temp_dir.h"

namespace hedgedb {
namespace encoders {
namespace {

namespace fs = std::filesystem;

class FeaturesTest : public testing_util::TempDirTest {
 protected:
  std::string Write(const std::string& name, const NpyArray& array) {
    const std::string path = Path(name);
    const Status s = WriteNpy(path, array);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }
};

TEST_F(FeaturesTest, LoadsFloat32FeaturesAndIntegerLabels) {
  const std::vector<float> features = {0.5f, -1.0f, 2.0f, 3.0f, 4.0f, 5.5f};
  const std::string f = Write("f.npy", MakeNpy(features, {3, 2}));
  const std::string l = Write("l.npy", MakeNpy(std::vector<int32_t>{101, 7, 101}, {3}));
  FeaturesDataset data;
  const Status s = LoadFeaturesDataset(f, l, &data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(data.count, 3);
  EXPECT_EQ(data.dim, 2);
  EXPECT_EQ(data.features, features);
  EXPECT_EQ(data.labels, (std::vector<int64_t>{101, 7, 101}));
  EXPECT_EQ(data.row(2)[1], 5.5f);
}

TEST_F(FeaturesTest, AcceptsFloat64FeaturesAndColumnLabels) {
  const std::vector<double> values = {1.25, 2.5, -3.0, 4.0};
  const std::string f = Write("f64.npy", MakeNpy(NpyType::kFloat64, values.data(), {2, 2}));
  const std::string l = Write("l.npy", MakeNpy(std::vector<int64_t>{3, 4}, {2, 1}));
  FeaturesDataset data;
  const Status s = LoadFeaturesDataset(f, l, &data);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(data.features, (std::vector<float>{1.25f, 2.5f, -3.0f, 4.0f}));
  EXPECT_EQ(data.labels, (std::vector<int64_t>{3, 4}));
}

TEST_F(FeaturesTest, RejectsBadShapesCountsAndValues) {
  const std::string labels3 = Write("l3.npy", MakeNpy(std::vector<int64_t>{0, 1, 2}, {3}));
  FeaturesDataset data;

  const std::string flat = Write("flat.npy", MakeNpy(std::vector<float>(6, 1.0f), {6}));
  Status s = LoadFeaturesDataset(flat, labels3, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("N x F"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(flat), std::string::npos) << s.message();

  const std::string four = Write("four.npy", MakeNpy(std::vector<float>(8, 1.0f), {4, 2}));
  s = LoadFeaturesDataset(four, labels3, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("3 labels"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4 feature rows"), std::string::npos) << s.message();

  const std::string ints = Write("ints.npy", MakeNpy(std::vector<int32_t>(6, 1), {3, 2}));
  s = LoadFeaturesDataset(ints, labels3, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("float32 or float64"), std::string::npos) << s.message();

  std::vector<float> with_inf(6, 1.0f);
  with_inf[5] = std::numeric_limits<float>::infinity();
  const std::string inf = Write("inf.npy", MakeNpy(with_inf, {3, 2}));
  s = LoadFeaturesDataset(inf, labels3, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("row 2, column 1"), std::string::npos) << s.message();

  const std::string ok = Write("ok.npy", MakeNpy(std::vector<float>(6, 1.0f), {3, 2}));
  const std::string negative = Write("neg.npy", MakeNpy(std::vector<int64_t>{0, -1, 2}, {3}));
  s = LoadFeaturesDataset(ok, negative, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("negative label -1 at row 1"), std::string::npos) << s.message();

  const std::string fractional =
      Write("frac.npy", MakeNpy(std::vector<float>{0.0f, 1.5f, 2.0f}, {3}));
  EXPECT_FALSE(LoadFeaturesDataset(ok, fractional, &data).ok());

  const std::string matrix_labels = Write("ml.npy", MakeNpy(std::vector<int64_t>(6, 1), {3, 2}));
  s = LoadFeaturesDataset(ok, matrix_labels, &data);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("1-D"), std::string::npos) << s.message();

  s = LoadFeaturesDataset(Path("missing.npy"), labels3, &data);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.npy"), std::string::npos) << s.message();
}

TEST(SelectLabelRangeTest, KeepsRowsInOrder) {
  FeaturesDataset data;
  data.count = 4;
  data.dim = 2;
  data.features = {0, 1, 10, 11, 20, 21, 30, 31};
  data.labels = {1, 150, 100, 101};
  const FeaturesDataset train = SelectLabelRange(data, 1, 100);
  EXPECT_EQ(train.count, 2);
  EXPECT_EQ(train.dim, 2);
  EXPECT_EQ(train.labels, (std::vector<int64_t>{1, 100}));
  EXPECT_EQ(train.features, (std::vector<float>{0, 1, 20, 21}));
  const FeaturesDataset test = SelectLabelRange(data, 101, 200);
  EXPECT_EQ(test.labels, (std::vector<int64_t>{150, 101}));
}

}  // namespace
}  // namespace encoders
}  // namespace hedgedb
