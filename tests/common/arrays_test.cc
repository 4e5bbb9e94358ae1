// Arrays -> EmbeddingView (hedgedb/arrays.h): which arrays each kind takes,
// their shapes against the collection, and the variance forms. The command
// line and the Python module both go through it, so these are the messages
// both print.
#include "hedgedb/arrays.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace hedgedb {
namespace {

CollectionSpec Spec(Kind kind, int dim, int components = 1, int code_k = 0) {
  CollectionSpec spec;
  spec.name = "c";
  spec.kind = kind;
  spec.dim = dim;
  spec.components = components;
  spec.code_k = code_k;
  return spec;
}

// Names every array as Python does; `given` ones get the shape and data.
EmbeddingArrays Named() {
  EmbeddingArrays a;
  a.vec.name = "vec";
  a.mean.name = "mean";
  a.var.name = "var";
  a.weights.name = "weights";
  a.codes.name = "codes";
  a.logp.name = "logp";
  return a;
}

void Give(EmbeddingArray* a, const std::vector<float>& data, std::vector<int64_t> shape) {
  a->given = true;
  a->floats = data.data();
  a->shape = std::move(shape);
}

// The message of a refused batch ("" when it is accepted).
std::string Refusal(const CollectionSpec& spec, bool queries, const EmbeddingArrays& arrays) {
  std::vector<float> converted;
  EmbeddingView view;
  const Status s = EmbeddingViewFromArrays(spec, queries, arrays, "the test", &converted, &view);
  EXPECT_TRUE(s.ok() || s.IsInvalidArgument()) << s.ToString();
  return s.ok() ? "" : s.message();
}

TEST(EmbeddingArraysTest, EachKindGetsItsView) {
  const std::vector<float> six(6, 0.5f), twelve(12, 0.25f), weights = {0.5f, 0.5f, 1, 0};
  EmbeddingArrays a = Named();
  Give(&a.vec, six, {2, 3});
  std::vector<float> converted;
  EmbeddingView view;
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kPoint, 3), false, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.n, 2);
  EXPECT_EQ(view.vec, six.data());
  EXPECT_EQ(view.mean, nullptr);

  // mog: mean and var (n, C, D), weights (n, C) optional.
  a = Named();
  Give(&a.mean, twelve, {2, 2, 3});
  Give(&a.var, twelve, {2, 2, 3});
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kMog, 3, 2), false, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.n, 2);
  EXPECT_EQ(view.var, twelve.data());  // var itself is borrowed, not copied
  EXPECT_EQ(view.weights, nullptr);
  Give(&a.weights, weights, {2, 2});
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kMog, 3, 2), true, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.weights, weights.data());

  // codes: items are int32 codes (n, d), queries logp tables (n, d, k).
  const std::vector<int32_t> codes = {0, 1, 2, 3};
  a = Named();
  a.codes.given = true;
  a.codes.ints = codes.data();
  a.codes.shape = {2, 2};
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kCodes, 2, 1, 4), false, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.codes, codes.data());
  EXPECT_EQ(view.n, 2);
  const std::vector<float> logp(16, std::log(0.25f));
  a = Named();
  Give(&a.logp, logp, {2, 2, 4});
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kCodes, 2, 1, 4), true, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.logp, logp.data());

  // No rows is a batch of 0 items, not an error.
  a = Named();
  const std::vector<float> none;
  Give(&a.vec, none, {0, 3});
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kPoint, 3), false, a, "x", &converted, &view).ok());
  EXPECT_EQ(view.n, 0);
}

TEST(EmbeddingArraysTest, VarianceFormsAreConvertedOnce) {
  const std::vector<float> mean(4, 0.f), log_var = {0.f, std::log(4.f), std::log(0.25f), 2.f};
  EmbeddingArrays a = Named();
  Give(&a.mean, mean, {2, 2});
  Give(&a.var, log_var, {2, 2});
  a.var_form = VarianceForm::kLogVar;
  std::vector<float> converted;
  EmbeddingView view;
  ASSERT_TRUE(
      EmbeddingViewFromArrays(Spec(Kind::kGaussian, 2), false, a, "x", &converted, &view).ok());
  ASSERT_EQ(view.var, converted.data());
  // exp(log var), computed independently here.
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(converted[i], std::exp(log_var[i])) << i;
  EXPECT_EQ(log_var[1], std::log(4.f));  // the input is left as it was

  // A std that is not > 0: refused naming the array and the item.
  const std::vector<float> stdev = {1.f, 1.f, -1.f, 1.f};
  a.var = EmbeddingArray();
  a.var.name = "std";
  Give(&a.var, stdev, {2, 2});
  a.var_form = VarianceForm::kStd;
  const std::string message = Refusal(Spec(Kind::kGaussian, 2), false, a);
  EXPECT_NE(message.find("std: "), std::string::npos) << message;
  EXPECT_NE(message.find("item 1"), std::string::npos) << message;
}

TEST(EmbeddingArraysTest, BadShapesNameTheArrayAndBothShapes) {
  const std::vector<float> data(64, 1.f);
  const CollectionSpec gaussian = Spec(Kind::kGaussian, 4);
  EmbeddingArrays a = Named();
  // The first array: any rows, the collection's dim.
  Give(&a.mean, data, {5, 3});
  Give(&a.var, data, {5, 4});
  EXPECT_EQ(Refusal(gaussian, false, a), "mean: expected shape (n, 4), got (5, 3)");
  // The later ones: the first one's rows.
  Give(&a.mean, data, {5, 4});
  Give(&a.var, data, {4, 4});
  EXPECT_EQ(Refusal(gaussian, false, a), "var: expected shape (5, 4), got (4, 4)");
  // A missing or an extra dimension.
  Give(&a.mean, data, {20});
  EXPECT_EQ(Refusal(gaussian, false, a), "mean: expected shape (n, 4), got (20,)");
  Give(&a.mean, data, {});
  EXPECT_EQ(Refusal(gaussian, false, a), "mean: expected shape (n, 4), got ()");
  Give(&a.mean, data, {2, 2, 4});
  EXPECT_EQ(Refusal(gaussian, false, a), "mean: expected shape (n, 4), got (2, 2, 4)");

  // mog: components count; weights (n, C).
  const CollectionSpec mog = Spec(Kind::kMog, 2, 3);
  a = Named();
  Give(&a.mean, data, {4, 3, 2});
  Give(&a.var, data, {4, 1, 2});
  EXPECT_EQ(Refusal(mog, false, a), "var: expected shape (4, 3, 2), got (4, 1, 2)");
  Give(&a.var, data, {4, 3, 2});
  Give(&a.weights, data, {4, 2});
  EXPECT_EQ(Refusal(mog, false, a), "weights: expected shape (4, 3), got (4, 2)");

  // codes queries: (n, d, k).
  a = Named();
  Give(&a.logp, data, {2, 4, 8});
  EXPECT_EQ(Refusal(Spec(Kind::kCodes, 4, 1, 16), true, a),
            "logp: expected shape (n, 4, 16), got (2, 4, 8)");
}

TEST(EmbeddingArraysTest, ArraysTheKindDoesNotTakeOrLacks) {
  const std::vector<float> data(16, 1.f);
  EmbeddingArrays a = Named();
  Give(&a.vec, data, {4, 4});
  EXPECT_EQ(Refusal(Spec(Kind::kGaussian, 4), false, a),
            "vec does not apply to the test (gaussian items take mean and var)");
  a = Named();
  Give(&a.mean, data, {4, 4});
  EXPECT_EQ(Refusal(Spec(Kind::kGaussian, 4), false, a),
            "var is missing for the test (gaussian items take mean and var)");
  // weights: mog only, and optional there.
  Give(&a.var, data, {4, 4});
  Give(&a.weights, data, {4, 1});
  EXPECT_EQ(Refusal(Spec(Kind::kGaussian, 4), false, a),
            "weights does not apply to the test (gaussian items take mean and var)");
  a = Named();
  Give(&a.vec, data, {4, 4});
  EXPECT_EQ(Refusal(Spec(Kind::kMog, 4, 2), true, a),
            "vec does not apply to the test (mog queries take mean, var and optionally weights)");
  // codes: items are codes, queries logp tables.
  a = Named();
  Give(&a.logp, data, {1, 4, 4});
  EXPECT_EQ(Refusal(Spec(Kind::kCodes, 4, 1, 4), false, a),
            "logp does not apply to the test (codes items take codes)");
  EXPECT_EQ(Refusal(Spec(Kind::kCodes, 4, 1, 4), true, Named()),
            "logp is missing for the test (codes queries take logp)");
  // The check of what is given reads no data (a front end runs it before it
  // reads any file).
  a = Named();
  a.vec.given = true;
  EXPECT_TRUE(CheckEmbeddingArraysGiven(Kind::kPoint, false, a, "x").ok());
  EXPECT_FALSE(CheckEmbeddingArraysGiven(Kind::kGaussian, false, a, "x").ok());
}

}  // namespace
}  // namespace hedgedb
