#include "calibration/calibration_map.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "calibration/fit.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "synthetic.h"

namespace hedgedb {
namespace calibration {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// One fitted map per method, on probability and unbounded scores, with and
// without a prior shift.
std::vector<CalibrationMap> FittedMaps() {
  std::vector<CalibrationMap> maps;
  const auto step = testing::Sample(testing::StepPopulation(), 5000, 1);
  const auto logistic = testing::Sample(testing::LogisticPopulation(), 5000, 2);
  const auto unbounded = testing::Sample(testing::UnboundedPopulation(), 5000, 3);
  FitOptions options;
  for (double target : {0.0, 0.01}) {
    options.target_base_rate = target;
    options.score_type = ScoreType::kMc;
    CalibrationMap map;
    EXPECT_TRUE(FitCalibration(step, options, &map).ok());
    maps.push_back(map);
    EXPECT_TRUE(FitPlatt(logistic, options, &map).ok());
    maps.push_back(map);
    EXPECT_TRUE(FitBeta(logistic, options, &map).ok());
    maps.push_back(map);
    EXPECT_TRUE(FitIsotonic(logistic, options, &map).ok());
    maps.push_back(map);
    options.score_type = ScoreType::kMls;
    EXPECT_TRUE(FitCalibration(unbounded, options, &map).ok());
    maps.push_back(map);
    EXPECT_TRUE(FitIsotonic(unbounded, options, &map).ok());
    maps.push_back(map);
  }
  return maps;
}

// Re-seals the checksum after a deliberate edit, so Decode's later checks
// are reached.
void Reseal(std::string* bytes) {
  const size_t body = bytes->size() - 4;
  std::string crc;
  PutFixed<uint32_t>(&crc, Crc32c(bytes->data(), body));
  bytes->replace(body, 4, crc);
}

TEST(CalibrationMapTest, EncodeDecodeRoundTrips) {
  for (const CalibrationMap& map : FittedMaps()) {
    ASSERT_TRUE(map.Validate().ok());
    const std::string bytes = map.Encode();
    CalibrationMap decoded;
    ASSERT_TRUE(CalibrationMap::Decode(bytes, &decoded).ok());
    EXPECT_EQ(decoded.method, map.method);
    EXPECT_EQ(decoded.score_type, map.score_type);
    EXPECT_EQ(decoded.params, map.params);
    EXPECT_EQ(decoded.knot_score, map.knot_score);
    EXPECT_EQ(decoded.knot_prob, map.knot_prob);
    EXPECT_EQ(decoded.base_rate, map.base_rate);
    EXPECT_EQ(decoded.fit_base_rate, map.fit_base_rate);
    EXPECT_EQ(decoded.num_pairs, map.num_pairs);
    EXPECT_EQ(decoded.report.chosen, map.report.chosen);
    EXPECT_EQ(decoded.report.reason, map.report.reason);
    ASSERT_EQ(decoded.report.candidates.size(), map.report.candidates.size());
    for (size_t i = 0; i < map.report.candidates.size(); ++i) {
      EXPECT_EQ(decoded.report.candidates[i].log_loss, map.report.candidates[i].log_loss);
    }
    EXPECT_EQ(decoded.Encode(), bytes);
    for (double s : {0.0, 0.3, 0.97, 1.0, -5.0}) EXPECT_EQ(decoded.Apply(s), map.Apply(s));
  }
}

TEST(CalibrationMapTest, EveryByteFlipAndTruncationIsRejected) {
  for (const CalibrationMap& map : FittedMaps()) {
    const std::string bytes = map.Encode();
    CalibrationMap decoded;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int mask : {0x01, 0x80, 0xFF}) {
        std::string bad = bytes;
        bad[i] = char(bad[i] ^ mask);
        Status s = CalibrationMap::Decode(bad, &decoded);
        ASSERT_TRUE(s.IsCorruption()) << "byte " << i << " mask " << mask << ": " << s.ToString();
      }
    }
    for (size_t n = 0; n < bytes.size(); ++n) {
      Status s = CalibrationMap::Decode(bytes.substr(0, n), &decoded);
      ASSERT_TRUE(s.IsCorruption()) << "truncated to " << n << ": " << s.ToString();
    }
    EXPECT_TRUE(CalibrationMap::Decode(bytes + '\0', &decoded).IsCorruption());
  }
}

TEST(CalibrationMapTest, DecodeLeavesTheMapUnchangedOnError) {
  CalibrationMap map = FittedMaps()[0], target = FittedMaps()[1];
  const std::string before = target.Encode();
  EXPECT_FALSE(CalibrationMap::Decode("garbage", &target).ok());
  EXPECT_FALSE(CalibrationMap::Decode(map.Encode().substr(1), &target).ok());
  EXPECT_EQ(target.Encode(), before);
}

TEST(CalibrationMapTest, WrongVersionIsRejected) {
  std::string bytes = FittedMaps()[0].Encode();
  bytes[4] = char(kCalibrationMapVersion + 1);
  Reseal(&bytes);
  CalibrationMap decoded;
  Status s = CalibrationMap::Decode(bytes, &decoded);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("unknown version " + std::to_string(kCalibrationMapVersion + 1)),
            std::string::npos)
      << s.ToString();
  // Version 0 never existed.
  bytes[4] = 0;
  Reseal(&bytes);
  EXPECT_TRUE(CalibrationMap::Decode(bytes, &decoded).IsCorruption());
}

// Offsets in the layout of calibration_map.cc: a 10-byte header, then
// method, score type (1 byte each), two base rates and the pair count (8
// each), the samples (4) and the sequence number (8): the parameter count is
// at 48.
constexpr size_t kParamCountOffset = 48;

TEST(CalibrationMapTest, HugeLengthsAreCheckedBeforeAllocating) {
  CalibrationMap platt;
  ASSERT_TRUE(
      FitPlatt(testing::Sample(testing::LogisticPopulation(), 5000, 4), FitOptions(), &platt).ok());
  const std::string good = platt.Encode();
  ASSERT_EQ(GetFixed<uint32_t>(good.data() + kParamCountOffset), 2u);
  const size_t knot_count_offset = kParamCountOffset + 4 + 2 * 8;
  for (size_t offset : {kParamCountOffset, knot_count_offset}) {
    for (uint32_t count : {3u, 0x10000000u, 0xFFFFFFFFu}) {
      std::string bad = good;
      std::string field;
      PutFixed<uint32_t>(&field, count);
      bad.replace(offset, 4, field);
      Reseal(&bad);
      CalibrationMap decoded;
      Status s = CalibrationMap::Decode(bad, &decoded);
      EXPECT_TRUE(s.IsCorruption()) << offset << " " << count << ": " << s.ToString();
    }
  }
}

TEST(CalibrationMapTest, InvalidContentWithAGoodChecksumIsRejected) {
  CalibrationMap iso;
  ASSERT_TRUE(
      FitIsotonic(testing::Sample(testing::StepPopulation(), 5000, 5), FitOptions(), &iso).ok());
  ASSERT_GE(iso.knot_score.size(), 4u);
  CalibrationMap decoded;
  auto rejected = [&](const CalibrationMap& bad) {
    EXPECT_FALSE(bad.Validate().ok());
    Status s = CalibrationMap::Decode(bad.Encode(), &decoded);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    return s.message();
  };
  CalibrationMap bad = iso;
  std::swap(bad.knot_prob[1], bad.knot_prob.back());
  EXPECT_NE(rejected(bad).find("not monotone"), std::string::npos);
  bad = iso;
  bad.knot_score[2] = bad.knot_score[1];
  EXPECT_NE(rejected(bad).find("not monotone"), std::string::npos);
  bad = iso;
  bad.knot_prob.back() = 1.5;
  rejected(bad);
  bad = iso;
  bad.knot_score[0] = kNaN;
  rejected(bad);
  bad = iso;
  bad.knot_prob.pop_back();
  rejected(bad);

  CalibrationMap platt;
  ASSERT_TRUE(
      FitPlatt(testing::Sample(testing::LogisticPopulation(), 5000, 6), FitOptions(), &platt).ok());
  bad = platt;
  bad.params[1] = kNaN;
  EXPECT_NE(rejected(bad).find("not finite"), std::string::npos);
  bad = platt;
  bad.params[0] = -1;
  EXPECT_NE(rejected(bad).find("negative"), std::string::npos);
  bad = platt;
  bad.params.push_back(1);
  rejected(bad);
  bad = platt;
  bad.base_rate = 0;
  rejected(bad);
  bad = platt;
  bad.fit_base_rate = kNaN;
  rejected(bad);
  bad = platt;
  bad.score_type = ScoreType::kDefault;
  rejected(bad);
  bad = platt;
  bad.method = Method::kBeta;  // 2 parameters, beta needs 3
  rejected(bad);
  bad = platt;
  bad.report.candidates.push_back({Method::kPlatt, kNaN, 0, 0});
  rejected(bad);
  bad = platt;
  bad.score_type = ScoreType::kL2;
  bad.method = Method::kBeta;
  bad.params = {1, 1, 0};
  EXPECT_NE(rejected(bad).find("probability score"), std::string::npos);
}

TEST(CalibrationMapTest, ApplyIsMonotoneAndInUnitInterval) {
  std::vector<double> probability_scores = {0, 1e-300, 1e-12, 1e-8, 1e-7, 2e-7};
  for (int i = 1; i < 20000; ++i) probability_scores.push_back(i / 20000.0);
  for (double s : {1 - 2e-7, 1 - 1e-7, 1 - 1e-9, 1.0}) probability_scores.push_back(s);
  std::vector<double> unbounded_scores = {-kInf, -1e308, -1e30, -1e6};
  for (int i = -20000; i <= 20000; ++i) unbounded_scores.push_back(i / 1000.0);
  for (double s : {1e6, 1e30, 1e308, kInf}) unbounded_scores.push_back(s);
  for (const CalibrationMap& map : FittedMaps()) {
    const auto& scores = IsProbabilityScore(map.score_type) ? probability_scores : unbounded_scores;
    double previous = -1;
    for (double s : scores) {
      const double p = map.Apply(s);
      ASSERT_TRUE(p >= 0 && p <= 1) << MethodName(map.method) << " at " << s << ": " << p;
      ASSERT_GE(p, previous) << MethodName(map.method) << " at " << s;
      previous = p;
    }
    EXPECT_EQ(map.Apply(kNaN), map.base_rate);
  }
}

TEST(CalibrationMapTest, SetBaseRateIsThePriorShift) {
  CalibrationMap platt;
  ASSERT_TRUE(
      FitPlatt(testing::Sample(testing::LogisticPopulation(), 5000, 7), FitOptions(), &platt).ok());
  const double p = platt.Apply(0.4);
  ASSERT_TRUE(platt.SetBaseRate(0.5).ok());
  const double pi0 = platt.fit_base_rate;
  const double logit = [](double x) { return std::log(x / (1 - x)); }(platt.Apply(0.4));
  EXPECT_NEAR(logit, std::log(p / (1 - p)) + 0 - std::log(pi0 / (1 - pi0)), 1e-9);
  EXPECT_TRUE(platt.SetBaseRate(0).IsInvalidArgument());
  EXPECT_TRUE(platt.SetBaseRate(1).IsInvalidArgument());
  EXPECT_TRUE(platt.SetBaseRate(kNaN).IsInvalidArgument());
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
