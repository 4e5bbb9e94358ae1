#include "tools/calibration_pictures.h"

#include <cmath>
#include <filesystem>

#include "report/plots.h"
#include "tools/cli_util.h"

namespace hedgedb {
namespace cli {
namespace {

report::ReliabilityCurve CurveOf(const std::string& name, const CalibrationQuality& quality) {
  report::ReliabilityCurve curve;
  curve.name = name;
  for (const CalibrationBin& b : quality.bins) {
    calibration::ReliabilityBin bin;
    bin.mean_prob = b.mean_prob;
    bin.fraction_positive = b.fraction_positive;
    bin.count = b.count;
    curve.bins.push_back(bin);
  }
  return curve;
}

}  // namespace

std::vector<std::string> WriteCalibrationPictures(const CalibrationReport& rep,
                                                  const std::string& dir, const std::string& title,
                                                  const std::string& prefix) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) Fail("cannot create the picture directory " + dir + ": " + ec.message());
  std::vector<std::string> paths;

  std::vector<report::ReliabilityCurve> curves;
  if (!rep.before.bins.empty()) curves.push_back(CurveOf("raw score", rep.before));
  if (!rep.after.bins.empty()) curves.push_back(CurveOf("calibrated (held out)", rep.after));
  if (!curves.empty()) {
    report::PlotOptions options;
    options.title = title + ": reliability";
    const std::string path = dir + "/" + prefix + "reliability.png";
    Check(report::WriteReliabilityDiagram(curves, options, path));
    paths.push_back(path);
  }

  // Two uncertainties of the best match: the query's eta (HIB) and
  // 1 - its calibrated probability.
  report::UncertaintySeries eta{"query uncertainty (eta)", {}};
  report::UncertaintySeries prob{"1 - calibrated top-1 probability", {}};
  for (const TopMatch& t : rep.top_matches) {
    if (std::isfinite(t.query_uncertainty)) eta.queries.push_back({t.query_uncertainty, t.correct});
    if (std::isfinite(t.prob)) prob.queries.push_back({1.0 - t.prob, t.correct});
  }
  std::vector<report::UncertaintySeries> series;
  if (eta.queries.size() == rep.top_matches.size() && !eta.queries.empty()) series.push_back(eta);
  if (prob.queries.size() == rep.top_matches.size() && !prob.queries.empty()) {
    series.push_back(prob);
  }
  if (!series.empty()) {
    report::PlotOptions options;
    options.width = 900;
    options.height = 600;
    options.title = title + ": precision@1 as uncertain queries are dropped";
    const std::string path = dir + "/" + prefix + "uncertainty.png";
    Check(report::WriteUncertaintyCurve(series, options, path));
    paths.push_back(path);
  }
  return paths;
}

}  // namespace cli
}  // namespace hedgedb
