// ToVariance: the four forms of a batch's variances, converted once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "hedgedb/types.h"

namespace hedgedb {
namespace {

TEST(VarianceFormTest, NamesParseBack) {
  for (VarianceForm f :
       {VarianceForm::kVar, VarianceForm::kStd, VarianceForm::kLogVar, VarianceForm::kLogStd}) {
    VarianceForm back = VarianceForm::kVar;
    ASSERT_TRUE(ParseVarianceForm(VarianceFormName(f), &back)) << VarianceFormName(f);
    EXPECT_EQ(back, f);
  }
  VarianceForm f;
  EXPECT_FALSE(ParseVarianceForm("sigma", &f));
}

TEST(VarianceFormTest, ConvertsEachFormToVariances) {
  const std::vector<float> var = {0.25f, 1.0f, 4.0f, 1e-6f};
  std::vector<float> std_dev, log_var, log_std, out(4);
  for (float v : var) {
    std_dev.push_back(std::sqrt(v));
    log_var.push_back(std::log(v));
    log_std.push_back(0.5f * std::log(v));
  }
  for (const auto& [form, in] :
       {std::pair{VarianceForm::kStd, &std_dev}, std::pair{VarianceForm::kLogVar, &log_var},
        std::pair{VarianceForm::kLogStd, &log_std}}) {
    ASSERT_TRUE(ToVariance(form, in->data(), 2, 2, out.data()).ok());
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out[i], var[i], 1e-6 * var[i]) << i;
  }
  // In place, and var passes through unchanged (the engine checks it).
  std::vector<float> in_place = std_dev;
  ASSERT_TRUE(ToVariance(VarianceForm::kStd, in_place.data(), 4, 1, in_place.data()).ok());
  EXPECT_FLOAT_EQ(in_place[2], 4.0f);
  ASSERT_TRUE(ToVariance(VarianceForm::kVar, var.data(), 1, 4, out.data()).ok());
  EXPECT_EQ(out, var);
}

TEST(VarianceFormTest, RefusesValuesWithoutAVariance) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(4);
  struct Case {
    VarianceForm form;
    std::vector<float> in;
    const char* needle;
  };
  for (const Case& c : {Case{VarianceForm::kStd, {1, 1, 0, 1}, "std of item 1 (value 0) is 0"},
                        Case{VarianceForm::kStd, {1, -2, 1, 1}, "std of item 0 (value 1) is -2"},
                        Case{VarianceForm::kStd, {1, 1, 1, nan}, "must be finite"},
                        Case{VarianceForm::kLogVar, {1, 200, 1, 1}, "outside float's range"},
                        Case{VarianceForm::kLogStd, {-100, 1, 1, 1}, "outside float's range"},
                        Case{VarianceForm::kLogVar, {1, 1, nan, 1}, "log_var of item 1"}}) {
    const Status s = ToVariance(c.form, c.in.data(), 2, 2, out.data());
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace hedgedb
