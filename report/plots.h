// Pictures of the calibration report as PNG files, drawn with Cairo
// (docs/calibration.md, "Pictures"). Plain data in, a PNG file out. This is
// the hedgedb_report library of the command line; the core library does not
// link it, so programs embedding hedgedb do not depend on Cairo.
#pragma once

#include <string>
#include <vector>

#include "calibration/metrics.h"
#include "hedgedb/status.h"
#include "report/uncertainty_curve.h"

namespace hedgedb {
namespace report {

// How the reliability diagram maps probabilities onto its axes.
enum class ProbabilityAxis {
  kLinear,   // 0..1 on both axes
  kLogOdds,  // logit scale on both axes, so bins near 0 (base rates ~1%) spread out
};

struct PlotOptions {
  int width = 800;  // pixels, 200..8000, aspect ratio at most 3:1
  int height = 800;
  std::string title;    // "" = a default title
  std::string x_label;  // "" = the plot's default
  std::string y_label;
  // Reliability diagram only.
  ProbabilityAxis probability_axis = ProbabilityAxis::kLinear;
  bool show_counts = true;  // lower panel: pairs per bin (log scale)
  // Linear axis: when at least half the bins crowd into [0, z] x [0, z]
  // (z = 0.02, 0.05, 0.1 or 0.2), an inset magnifies that corner, if it
  // finds a place that covers no data.
  bool zoom_inset = true;
  // Uncertainty curve only.
  UncertaintyCurveOptions curve;
  bool show_references = true;  // oracle and random-drop lines (same queries only)
};

// One curve of a reliability diagram: equal-mass bins as measured by
// calibration::MeasureCalibration (CalibrationMetrics::bins).
struct ReliabilityCurve {
  std::string name;  // legend text, e.g. "raw score", "calibrated"
  std::vector<calibration::ReliabilityBin> bins;
};

// Fraction of matches against mean predicted probability per bin, one line
// per curve, over the dashed diagonal of perfect calibration. The legend
// gives each curve's ECE, computed from its bins. Errors (InvalidArgument): no
// curves, more than 8, a curve without bins, a probability that is NaN or
// outside [0, 1], a negative count or a curve with no pairs, a size out of
// range; IOError when the file cannot be written. On error no file is
// created and an existing one is left as it was.
Status WriteReliabilityDiagram(const std::vector<ReliabilityCurve>& curves,
                               const PlotOptions& options, const std::string& png_path);

// One curve of the uncertainty plot: the same queries ranked by one
// uncertainty (e.g. the raw score's, or 1 - calibrated probability).
struct UncertaintySeries {
  std::string name;
  std::vector<QueryOutcome> queries;
};

// HIB Figure 4: accuracy of the queries kept (y) against the fraction of the
// most uncertain queries dropped (x), one line per series (UncertaintyCurve).
// An uncertainty that predicts errors rises; one that does not stays flat.
// When every series has the same number of queries and of correct ones, the
// flat random-drop line and the oracle (errors dropped first) are drawn for
// reference. Errors as WriteReliabilityDiagram, plus UncertaintyCurve's.
Status WriteUncertaintyCurve(const std::vector<UncertaintySeries>& series,
                             const PlotOptions& options, const std::string& png_path);

}  // namespace report
}  // namespace hedgedb
