// Template fusion (hedgedb/fuse.h): the product of Gaussians against a hand
// computation, the kinds it refuses, and the same input errors as ingest.
#include "hedgedb/fuse.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "engine_test_util.h"

namespace hedgedb {
namespace testing {
namespace {

bool Mentions(const Status& s, const std::string& word) {
  return s.message().find(word) != std::string::npos;
}

// Two items, D = 2, worked out by hand:
//   dim 0: var 1 and 4 -> precision 1 + 1/4 = 5/4, var 0.8;
//          means 1 and 6 -> mean 0.8 * (1/1 + 6/4) = 2
//   dim 1: var 2 and 2 -> var 1; means -1 and 3 -> the average, 1
TEST(FuseGaussiansTest, ProductOfTwoGaussiansByHand) {
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 2);
  const std::vector<float> mean = {1, -1, 6, 3}, var = {1, 2, 4, 2};
  EmbeddingView items;
  items.n = 2;
  items.mean = mean.data();
  items.var = var.data();
  std::vector<float> fused_mean, fused_var, weights = {7};
  const Status s = FuseGaussians(spec, items, &fused_mean, &fused_var, &weights);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(fused_mean.size(), 2u);
  ASSERT_EQ(fused_var.size(), 2u);
  EXPECT_FLOAT_EQ(fused_var[0], 0.8f);
  EXPECT_FLOAT_EQ(fused_mean[0], 2.0f);
  EXPECT_FLOAT_EQ(fused_var[1], 1.0f);
  EXPECT_FLOAT_EQ(fused_mean[1], 1.0f);
  EXPECT_TRUE(weights.empty());  // gaussian: no weights
}

// n equal items: the mean stays, the variance divides by n; one item is
// returned unchanged, bit for bit.
TEST(FuseGaussiansTest, EqualItemsShrinkTheVarianceAndOneItemIsItself) {
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 3);
  const std::vector<float> one_mean = {0.3f, -2.0f, 5.5f}, one_var = {0.7f, 1e-3f, 9.0f};
  std::vector<float> mean, var;
  for (int i = 0; i < 4; ++i) {
    mean.insert(mean.end(), one_mean.begin(), one_mean.end());
    var.insert(var.end(), one_var.begin(), one_var.end());
  }
  EmbeddingView items;
  items.n = 4;
  items.mean = mean.data();
  items.var = var.data();
  std::vector<float> fused_mean, fused_var;
  ASSERT_TRUE(FuseGaussians(spec, items, &fused_mean, &fused_var).ok());
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(fused_mean[j], one_mean[j]);
    EXPECT_FLOAT_EQ(fused_var[j], one_var[j] / 4);
  }
  items.n = 1;
  ASSERT_TRUE(FuseGaussians(spec, items, &fused_mean, &fused_var).ok());
  EXPECT_EQ(fused_mean, one_mean);
  EXPECT_EQ(fused_var, one_var);
}

// A large random batch against the formula in double.
TEST(FuseGaussiansTest, MatchesTheFormulaInDouble) {
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16);
  const Batch items = RandomBatch(spec, 50, 0, 3);
  std::vector<float> fused_mean, fused_var;
  ASSERT_TRUE(FuseGaussians(spec, items.view(), &fused_mean, &fused_var).ok());
  for (size_t j = 0; j < 16; ++j) {
    double precision = 0, sum = 0;
    for (size_t i = 0; i < 50; ++i) {
      precision += 1.0 / items.var[i * 16 + j];
      sum += items.mean[i * 16 + j] / double(items.var[i * 16 + j]);
    }
    EXPECT_NEAR(fused_var[j], 1.0 / precision, 1e-6 / precision);
    EXPECT_NEAR(fused_mean[j], sum / precision, 1e-6 * (1 + std::fabs(sum / precision)));
  }
}

TEST(FuseGaussiansTest, PointsAndCodesAreRefused) {
  std::vector<float> mean, var, weights;
  const CollectionSpec point = MakeSpec("p", Kind::kPoint, 4);
  const Batch points = RandomBatch(point, 3, 0, 1);
  Status s = FuseGaussians(point, points.view(), &mean, &var);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Mentions(s, "no variance")) << s.ToString();

  CollectionSpec codes = MakeSpec("k", Kind::kCodes, 6);
  const Batch code_items = RandomBatch(codes, 3, 0, 1);
  s = FuseGaussians(codes, code_items.view(), &mean, &var, &weights);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Mentions(s, "discrete")) << s.ToString();
}

// A product of n mixtures of C components has C^n components: fused only
// when that fits the collection's C (n == 1, or C == 1).
TEST(FuseGaussiansTest, MixturesFuseOnlyWhenTheProductFitsC) {
  std::vector<float> mean, var, weights;
  CollectionSpec mog = MakeSpec("m", Kind::kMog, 3);
  mog.components = 2;
  const Batch items = RandomBatch(mog, 3, 0, 1);
  Status s = FuseGaussians(mog, items.view(), &mean, &var, &weights);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Mentions(s, "2^3 components")) << s.ToString();
  EXPECT_TRUE(Mentions(s, "more than the 2")) << s.ToString();

  // One item: itself, with its weights normalised as a collection stores them.
  EmbeddingView one = items.view();
  one.n = 1;
  const std::vector<float> raw_weights = {0.2f, 0.8000001f};
  one.weights = raw_weights.data();
  s = FuseGaussians(mog, one, &mean, &var, &weights);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(mean, std::vector<float>(items.mean.begin(), items.mean.begin() + 6));
  EXPECT_EQ(var, std::vector<float>(items.var.begin(), items.var.begin() + 6));
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_FLOAT_EQ(weights[0] + weights[1], 1.0f);
  // The weights output is required for mixtures.
  EXPECT_TRUE(FuseGaussians(mog, one, &mean, &var).IsInvalidArgument());

  // C == 1: the gaussian product, weight 1.
  mog.components = 1;
  CollectionSpec gaussian = MakeSpec("g", Kind::kGaussian, 3);
  const Batch g = RandomBatch(gaussian, 4, 0, 2);
  EmbeddingView as_mog = g.view();
  std::vector<float> g_mean, g_var;
  ASSERT_TRUE(FuseGaussians(gaussian, g.view(), &g_mean, &g_var).ok());
  s = FuseGaussians(mog, as_mog, &mean, &var, &weights);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(mean, g_mean);
  EXPECT_EQ(var, g_var);
  EXPECT_EQ(weights, std::vector<float>{1.0f});
}

// The same errors as ingest, word for word: NaN, variance <= 0, missing
// buffers. An empty batch is an ingest of nothing, but nothing to fuse.
TEST(FuseGaussiansTest, ChecksItemsLikeIngest) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  const Batch good = RandomBatch(spec, 3, 0, 1);
  std::vector<Batch> bad(4, good);
  bad[0].mean[6] = std::nanf("");
  bad[1].var[5] = 0.0f;
  bad[2].var[9] = -1.0f;
  bad[3].var[1] = INFINITY;
  Batch empty = good;
  empty.n = 0;
  std::vector<int64_t> none;
  ASSERT_TRUE(db->Ingest("c", empty.ingest(), &none).ok());
  EXPECT_TRUE(none.empty());
  std::vector<float> empty_mean, empty_var;
  const Status nothing = FuseGaussians(spec, empty.view(), &empty_mean, &empty_var);
  EXPECT_TRUE(nothing.IsInvalidArgument());
  EXPECT_NE(nothing.message().find("empty"), std::string::npos) << nothing.ToString();
  for (const Batch& b : bad) {
    std::vector<int64_t> ids;
    const Status ingest = db->Ingest("c", b.ingest(), &ids);
    ASSERT_FALSE(ingest.ok());
    std::vector<float> mean, var;
    const Status fused = FuseGaussians(spec, b.view(), &mean, &var);
    EXPECT_EQ(fused.ToString(), ingest.ToString());
  }
  EmbeddingView no_var = good.view();
  no_var.var = nullptr;
  std::vector<float> mean, var;
  EXPECT_TRUE(FuseGaussians(spec, no_var, &mean, &var).IsInvalidArgument());
  EXPECT_EQ(StatsOf(db.get(), "c").items, 0);

  CollectionSpec no_dim = spec;
  no_dim.dim = 0;
  EXPECT_TRUE(FuseGaussians(no_dim, good.view(), &mean, &var).IsInvalidArgument());
}

// Precisions add up: items with the smallest float variances fuse to a
// variance below float's range, which is refused rather than stored as 0.
TEST(FuseGaussiansTest, AFusedVarianceThatUnderflowsIsAnError) {
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 1);
  const std::vector<float> mean = {1, 2, 3}, var = {FLT_TRUE_MIN, FLT_TRUE_MIN, FLT_TRUE_MIN};
  EmbeddingView items;
  items.n = 3;
  items.mean = mean.data();
  items.var = var.data();
  std::vector<float> fused_mean, fused_var;
  const Status s = FuseGaussians(spec, items, &fused_mean, &fused_var);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Mentions(s, "float's range")) << s.ToString();
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
