#include "tools/calibration_pictures.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "report/plots.h"
#include "tools/cli_util.h"

namespace hedgedb {
namespace cli {
namespace {

report::ReliabilityCurve CurveOf(const std::string& name, const std::vector<CalibrationBin>& bins) {
  report::ReliabilityCurve curve;
  curve.name = name;
  for (const CalibrationBin& b : bins) {
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
  if (!rep.before.bins.empty()) curves.push_back(CurveOf("raw score", rep.before.bins));
  if (!rep.after.bins.empty()) curves.push_back(CurveOf("calibrated (held out)", rep.after.bins));
  if (!curves.empty()) {
    report::PlotOptions options;
    options.title = title + ": reliability";
    const std::string path = dir + "/" + prefix + "reliability.png";
    Check(report::WriteReliabilityDiagram(curves, options, path));
    paths.push_back(path);
  }

  // The top-1 answers' reliability within each quartile of query eta: does
  // p hold for certain and uncertain queries alike?
  std::vector<report::ReliabilityCurve> by_eta;
  for (size_t g = 0; g < rep.after.eta_quartiles.size(); ++g) {
    const EtaGroupQuality& group = rep.after.eta_quartiles[g];
    if (group.top1_bins.empty()) continue;
    char name[96];
    std::snprintf(name, sizeof(name), "eta quartile %zu (%.4g - %.4g)", g + 1, group.eta_lo,
                  group.eta_hi);
    by_eta.push_back(CurveOf(name, group.top1_bins));
  }
  if (by_eta.size() == rep.after.eta_quartiles.size() && !by_eta.empty()) {
    report::PlotOptions options;
    options.title = title + ": top-1 reliability by quartile of query eta (held out)";
    const std::string path = dir + "/" + prefix + "reliability_by_eta.png";
    Check(report::WriteReliabilityDiagram(by_eta, options, path));
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
