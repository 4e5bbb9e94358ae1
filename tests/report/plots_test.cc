#include "report/plots.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "calibration/metrics.h"
#include "common/random.h"
#include "report/draw.h"
#include "temp_dir.h"

namespace hedgedb {
namespace report {
namespace {

using calibration::ReliabilityBin;

double Uniform(uint64_t* state) { return double(SplitMix64(state) >> 11) * 0x1.0p-53; }
double Sigmoid(double t) { return 1 / (1 + std::exp(-t)); }

// Synthetic pairs with a base rate near 1%: the true match probability q has
// logit q ~ N(-5.5, 2); the raw score is over-confident (logit p = 1.8 logit q
// + 4), the calibrated one is q itself.
void SyntheticMetrics(calibration::CalibrationMetrics* raw,
                      calibration::CalibrationMetrics* calibrated) {
  uint64_t state = 7;
  std::vector<calibration::ScoredPair> raw_pairs, cal_pairs;
  for (int i = 0; i < 100000; ++i) {
    double z0, z1;
    BoxMuller(1 - Uniform(&state), Uniform(&state), &z0, &z1);
    const double t = -5.5 + 2 * z0;
    const bool match = Uniform(&state) < Sigmoid(t);
    raw_pairs.push_back({Sigmoid(1.8 * t + 4), match});
    cal_pairs.push_back({Sigmoid(t), match});
  }
  ASSERT_TRUE(calibration::MeasureCalibration(raw_pairs, raw).ok());
  ASSERT_TRUE(calibration::MeasureCalibration(cal_pairs, calibrated).ok());
}

// 2,000 queries of varying difficulty, seen by two uncertainties: one
// through heavy noise, one through less.
void SyntheticQueries(std::vector<UncertaintySeries>* series) {
  uint64_t state = 11;
  UncertaintySeries raw{"embedding variance", {}}, cal{"1 - top-1 probability", {}};
  for (int i = 0; i < 2000; ++i) {
    const double p_right = 0.15 + 0.8 * Uniform(&state);
    const bool right = Uniform(&state) < p_right;
    double z0, z1;
    BoxMuller(1 - Uniform(&state), Uniform(&state), &z0, &z1);
    raw.queries.push_back({(1 - p_right) + 0.5 * z0, right});
    cal.queries.push_back({(1 - p_right) + 0.12 * z1, right});
  }
  *series = {raw, cal};
}

struct Png {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;  // ARGB, row-major
  uint32_t At(int x, int y) const { return pixels[size_t(y) * size_t(width) + size_t(x)]; }
};

bool ReadPng(const std::string& path, Png* png) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    return false;
  }
  cairo_surface_flush(s);
  png->width = cairo_image_surface_get_width(s);
  png->height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  png->pixels.resize(size_t(png->width) * size_t(png->height));
  for (int y = 0; y < png->height; ++y)
    for (int x = 0; x < png->width; ++x)
      png->pixels[size_t(y) * size_t(png->width) + size_t(x)] =
          reinterpret_cast<const uint32_t*>(data + size_t(y) * size_t(stride))[x];
  cairo_surface_destroy(s);
  return true;
}

// Pixels in the (2r+1)^2 box around (x, y) that are not near-white (and not
// the light grey of the grid).
int InkAround(const Png& png, double x, double y, int r) {
  int ink = 0;
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx) {
      const uint32_t p = png.At(int(x) + dx, int(y) + dy);
      const int red = (p >> 16) & 0xff, green = (p >> 8) & 0xff, blue = p & 0xff;
      if (red + green + blue < 3 * 200) ++ink;
    }
  return ink;
}

class ReportPlotsTest : public testing_util::TempDirTest {};

TEST_F(ReportPlotsTest, ReliabilityDiagramIsAPngOfTheAskedSizeWithTheDiagonal) {
  // A curve far off the diagonal, so ink on the diagonal is the diagonal's.
  ReliabilityCurve curve{"raw", {{0.6, 0.05, 100}, {0.8, 0.1, 100}, {0.95, 0.2, 100}}};
  PlotOptions options;
  options.width = 640;
  options.height = 720;
  const std::string path = Path("reliability.png");
  ASSERT_TRUE(WriteReliabilityDiagram({curve}, options, path).ok());
  Png png;
  ASSERT_TRUE(ReadPng(path, &png));
  EXPECT_EQ(png.width, 640);
  EXPECT_EQ(png.height, 720);
  const internal::Rect area = internal::ReliabilityDataArea(options);
  for (double v : {0.25, 0.45, 0.75}) {
    // Data (v, v) in pixels; the dashes are 7 units long, so look at a box
    // wider than a gap.
    const double x = area.x + v * area.w, y = area.y + area.h - v * area.h;
    EXPECT_GT(InkAround(png, x, y, 6), 0) << "no diagonal at " << v;
  }
  // The curve's own points are drawn too.
  EXPECT_GT(InkAround(png, area.x + 0.8 * area.w, area.y + area.h - 0.1 * area.h, 2), 10);
  // Mostly background: a drawing, not a filled rectangle.
  int white = 0;
  for (uint32_t p : png.pixels) white += (p & 0xffffff) == 0xffffff;
  EXPECT_GT(white, int(png.pixels.size() / 2));
  // Nothing but the PNG in the directory: the temporary file was renamed.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(ReportPlotsTest, LogOddsAxisAndNoCountsPanel) {
  calibration::CalibrationMetrics raw, cal;
  SyntheticMetrics(&raw, &cal);
  PlotOptions options;
  options.probability_axis = ProbabilityAxis::kLogOdds;
  options.show_counts = false;
  const std::string path = Path("logodds.png");
  ASSERT_TRUE(
      WriteReliabilityDiagram({{"raw", raw.bins}, {"calibrated", cal.bins}}, options, path).ok());
  Png png;
  ASSERT_TRUE(ReadPng(path, &png));
  EXPECT_EQ(png.width, 800);
  const internal::Rect area = internal::ReliabilityDataArea(options);
  // The diagonal runs corner to corner on the symmetric logit range.
  EXPECT_GT(InkAround(png, area.x + area.w / 2, area.y + area.h / 2, 6), 0);
}

TEST_F(ReportPlotsTest, UncertaintyCurveIsAPngOfTheAskedSize) {
  std::vector<UncertaintySeries> series;
  SyntheticQueries(&series);
  PlotOptions options;
  options.width = 900;
  options.height = 600;
  const std::string path = Path("uncertainty.png");
  ASSERT_TRUE(WriteUncertaintyCurve(series, options, path).ok());
  Png png;
  ASSERT_TRUE(ReadPng(path, &png));
  EXPECT_EQ(png.width, 900);
  EXPECT_EQ(png.height, 600);
  // A single series without references draws too.
  options.show_references = false;
  ASSERT_TRUE(WriteUncertaintyCurve({series[0]}, options, path).ok());
}

TEST_F(ReportPlotsTest, BadInputIsAnErrorAndWritesNothing) {
  const std::string path = Path("bad.png");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ReliabilityCurve good{"ok", {{0.2, 0.1, 10}, {0.7, 0.5, 10}}};
  PlotOptions options;
  std::string target = path;
  const auto expect_invalid = [&](const std::vector<ReliabilityCurve>& curves, const PlotOptions& o,
                                  const char* needle) {
    const Status s = WriteReliabilityDiagram(curves, o, target);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  expect_invalid({}, options, "no curves");
  expect_invalid({good, {"empty", {}}}, options, "'empty' has no bins");
  expect_invalid({{"nan", {{nan, 0.1, 10}}}}, options, "mean probability");
  expect_invalid({{"big", {{0.5, 1.5, 10}}}}, options, "fraction positive");
  expect_invalid({{"neg", {{0.5, 0.5, -1}}}}, options, "negative count");
  expect_invalid({{"zero", {{0.5, 0.5, 0}}}}, options, "no pairs");
  expect_invalid(std::vector<ReliabilityCurve>(9, good), options, "at most 8");
  PlotOptions tiny;
  tiny.width = 50;
  expect_invalid({good}, tiny, "size 50x800");
  tiny.width = 3000;
  expect_invalid({good}, tiny, "3:1");
  target = "";
  expect_invalid({good}, options, "empty output path");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ReportPlotsTest, BadUncertaintyInputIsAnError) {
  const std::string path = Path("bad.png");
  PlotOptions options;
  Status s = WriteUncertaintyCurve({}, options, path);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = WriteUncertaintyCurve({{"none", {}}}, options, path);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("'none'"), std::string::npos) << s.message();
  s = WriteUncertaintyCurve({{"nan", {{std::nan(""), true}}}}, options, path);
  EXPECT_TRUE(s.IsInvalidArgument());
  options.curve.max_drop = 1;
  s = WriteUncertaintyCurve({{"drop all", {{0.5, true}}}}, options, path);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ReportPlotsTest, UnwritableDirectoryIsAnIOErrorAndLeavesNoFile) {
  const ReliabilityCurve curve{"c", {{0.2, 0.1, 10}, {0.7, 0.5, 10}}};
  const std::string path = Path("missing/dir/r.png");
  const Status s = WriteReliabilityDiagram({curve}, PlotOptions(), path);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("missing/dir"), std::string::npos) << s.message();
  EXPECT_TRUE(std::filesystem::is_empty(dir_));

  // A path that is a directory: the rename fails, the temporary file goes.
  std::filesystem::create_directory(Path("taken.png"));
  const Status u =
      WriteUncertaintyCurve({{"q", {{0.1, true}, {0.9, false}}}}, PlotOptions(), Path("taken.png"));
  EXPECT_FALSE(u.ok());
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_TRUE(std::filesystem::is_directory(Path("taken.png")));
}

// The example pictures of docs/calibration.md from synthetic data: an
// over-confident raw score and a calibrated one, on both axes. Written to
// $HEDGEDB_PLOT_DIR when set (to look at them), else to the test's directory.
TEST_F(ReportPlotsTest, ExamplePictures) {
  const char* env = std::getenv("HEDGEDB_PLOT_DIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : dir_;
  calibration::CalibrationMetrics raw, cal;
  SyntheticMetrics(&raw, &cal);
  EXPECT_GT(raw.ece, 0.02);
  EXPECT_LT(cal.ece, 0.01);
  const std::vector<ReliabilityCurve> curves = {{"raw score", raw.bins}, {"calibrated", cal.bins}};
  PlotOptions options;
  options.title = "Reliability (synthetic pairs, base rate 1%)";
  ASSERT_TRUE(WriteReliabilityDiagram(curves, options, dir + "/reliability.png").ok());
  options.probability_axis = ProbabilityAxis::kLogOdds;
  ASSERT_TRUE(WriteReliabilityDiagram(curves, options, dir + "/reliability_logodds.png").ok());

  std::vector<UncertaintySeries> series;
  SyntheticQueries(&series);
  PlotOptions curve_options;
  curve_options.width = 900;
  curve_options.height = 650;
  curve_options.title = "Precision@1 as uncertain queries are dropped (synthetic)";
  ASSERT_TRUE(WriteUncertaintyCurve(series, curve_options, dir + "/uncertainty.png").ok());
  for (const char* name : {"reliability.png", "reliability_logodds.png", "uncertainty.png"}) {
    Png png;
    EXPECT_TRUE(ReadPng(dir + "/" + name, &png)) << name;
  }
}

}  // namespace
}  // namespace report
}  // namespace hedgedb
