#include "report/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/draw.h"

namespace hedgedb {
namespace report {
namespace {

using internal::Axis;
using internal::Canvas;
using internal::Color;
using internal::LegendEntry;
using internal::Panel;
using internal::Scale;
using internal::Tick;
using Points = std::vector<std::pair<double, double>>;

constexpr int kMinSide = 200, kMaxSide = 8000;
constexpr size_t kMaxCurves = 8;
const Color kReferenceColor{0.45, 0.45, 0.45};

Status CheckCommon(size_t curves, const PlotOptions& o, const std::string& path, const char* what) {
  const std::string prefix = std::string(what) + ": ";
  if (curves == 0) return Status::InvalidArgument(prefix + "no curves to draw");
  if (curves > kMaxCurves)
    return Status::InvalidArgument(prefix + "at most " + std::to_string(kMaxCurves) +
                                   " curves, got " + std::to_string(curves));
  if (o.width < kMinSide || o.width > kMaxSide || o.height < kMinSide || o.height > kMaxSide)
    return Status::InvalidArgument(prefix + "size " + std::to_string(o.width) + "x" +
                                   std::to_string(o.height) + " outside " +
                                   std::to_string(kMinSide) + ".." + std::to_string(kMaxSide));
  // Margins and fonts scale with the picture's area: a strip would leave no
  // room between them.
  if (o.width > 3 * o.height || o.height > 3 * o.width)
    return Status::InvalidArgument(prefix + "size " + std::to_string(o.width) + "x" +
                                   std::to_string(o.height) + " is more elongated than 3:1");
  if (path.empty()) return Status::InvalidArgument(prefix + "empty output path");
  return Status::OK();
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string CurveName(const std::string& name, size_t i) {
  return name.empty() ? "curve " + std::to_string(i + 1) : name;
}

// Title, and the axis labels centred on the panels they name.
void DrawLabels(const Canvas& canvas, const PlotOptions& o, const std::string& title,
                const std::string& x_label, const internal::Rect& x_span,
                const std::string& y_label, const internal::Rect& y_span) {
  const double u = canvas.unit();
  canvas.SetColor({0.1, 0.1, 0.1});
  canvas.Text(title, o.width / 2.0, 20 * u, 21, 0.5, 0, true);
  canvas.Text(x_label, x_span.x + x_span.w / 2, o.height - 14 * u, 16, 0.5, 1);
  canvas.Text(y_label, 14 * u, y_span.y + y_span.h / 2, 16, 0.5, 0, false, true);
}

// The logit axis range: out to the decade beyond the point nearest to 0 and
// the one nearest to 1, and at least 0.01 .. 0.9 so the scale shows its
// shape. Both axes share it, so the diagonal still runs corner to corner.
Axis LogitRange(const std::vector<ReliabilityCurve>& curves) {
  double near0 = 0.01, near1 = 0.1;  // distances from 0 and from 1
  for (const ReliabilityCurve& c : curves)
    for (const calibration::ReliabilityBin& b : c.bins)
      for (double v : {b.mean_prob, b.fraction_positive}) {
        if (v > 0) near0 = std::min(near0, v);
        if (v < 1) near1 = std::min(near1, 1 - v);
      }
  const auto decade_below = [](double d) {
    return std::max(1e-6, std::pow(10.0, std::floor(std::log10(d) + 1e-9)));
  };
  return {decade_below(near0), 1 - decade_below(near1), Scale::kLogit};
}

// Lines and markers of the curves on one panel; returns points sampled along
// them (pixels) for placing boxes clear of the data.
Points DrawCurves(const Canvas& canvas, const Panel& panel,
                  const std::vector<ReliabilityCurve>& curves, double radius, double line_width) {
  const double u = canvas.unit();
  Points drawn;
  for (size_t i = 0; i < curves.size(); ++i) {
    std::vector<calibration::ReliabilityBin> bins = curves[i].bins;
    std::stable_sort(
        bins.begin(), bins.end(),
        [](const calibration::ReliabilityBin& a, const calibration::ReliabilityBin& b) {
          return a.mean_prob < b.mean_prob;
        });
    const Color color = internal::SeriesColor(int(i));
    Points line;
    for (const auto& b : bins)
      if (b.count > 0) line.push_back({panel.Px(b.mean_prob), panel.Py(b.fraction_positive)});
    DrawLine(canvas, line, color, line_width);
    const auto off = [&](const Axis& a, double v) { return a.clamp && (v < a.lo || v > a.hi); };
    for (const auto& b : bins) {
      if (b.count == 0) continue;
      // On the logit axis a bin without matches (or without non-matches)
      // has no finite position: it is pinned to the edge, drawn hollow.
      const bool off_scale = off(panel.x, b.mean_prob) || off(panel.y, b.fraction_positive);
      DrawMarker(canvas, internal::SeriesMarker(int(i)), panel.Px(b.mean_prob),
                 panel.Py(b.fraction_positive), radius, color, !off_scale);
    }
    internal::SamplePolyline(line, 4 * u, &drawn);
  }
  return drawn;
}

// The zoom of the inset: the smallest z that holds at least half of all bins
// in [0, z] x [0, z], or 0 when none of the candidates does.
double ZoomRange(const std::vector<ReliabilityCurve>& curves) {
  for (double z : {0.02, 0.05, 0.1, 0.2}) {
    size_t inside = 0, all = 0;
    for (const ReliabilityCurve& c : curves)
      for (const auto& b : c.bins) {
        if (b.count == 0) continue;
        ++all;
        inside += b.mean_prob <= z && b.fraction_positive <= z;
      }
    if (2 * inside >= all) return z;
  }
  return 0;
}

// The inset: the corner [0, z] x [0, z] magnified, in a box placed clear of
// the data and the legend; nothing when there is no such place.
void DrawZoomInset(const Canvas& canvas, const Panel& main,
                   const std::vector<ReliabilityCurve>& curves, double z, const Points& avoid,
                   const internal::Rect& legend) {
  const double u = canvas.unit();
  const double side = 0.3 * std::min(main.data.w, main.data.h);
  // Room inside the box for tick labels (left, bottom) and a caption (top).
  const double left = 40 * u, bottom = 22 * u, top = 22 * u, right = 10 * u;
  const double box_w = side + left + right, box_h = side + top + bottom;
  size_t covered = 0;
  const auto at = internal::PlaceBox(canvas, main, box_w, box_h, avoid, {legend}, &covered);
  if (covered > 0) return;
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, at.first, at.second, box_w, box_h);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
  cairo_set_line_width(cr, 1 * u);
  cairo_stroke(cr);
  // The zoomed region, outlined on the main plot.
  cairo_rectangle(cr, main.Px(0), main.Py(z), main.Px(z) - main.Px(0), main.Py(0) - main.Py(z));
  cairo_stroke(cr);
  cairo_restore(cr);

  Axis zoom{0, z, Scale::kLinear, false};
  const double pad = 6 * u;
  const Panel inset{{at.first + left + pad, at.second + top + pad, side - 2 * pad, side - 2 * pad},
                    pad,
                    zoom,
                    zoom};
  std::vector<Tick> ticks = internal::LinearTicks(0, z, z / 4, z < 0.1 ? 3 : 2);
  for (size_t i = 0; i < ticks.size(); ++i)
    if (i % 2 == 1) ticks[i].label.clear();
  internal::DrawPanel(canvas, inset, ticks, ticks, true, 11);
  canvas.SetColor({0.1, 0.1, 0.1});
  canvas.Text("zoom: 0 to " + Fixed(z, z < 0.1 ? 2 : 1), inset.Frame().x + inset.Frame().w / 2,
              at.second + 5 * u, 12, 0.5, 0);
  const internal::Rect f = inset.Frame();
  cairo_save(cr);
  cairo_rectangle(cr, f.x, f.y, f.w, f.h);
  cairo_clip(cr);
  DrawLine(canvas, {{inset.Px(0), inset.Py(0)}, {inset.Px(z), inset.Py(z)}}, kReferenceColor, 1.3,
           5);
  DrawCurves(canvas, inset, curves, 4 * u, 1.6);
  cairo_restore(cr);
}

}  // namespace

Status WriteReliabilityDiagram(const std::vector<ReliabilityCurve>& curves,
                               const PlotOptions& options, const std::string& png_path) {
  HEDGEDB_RETURN_IF_ERROR(CheckCommon(curves.size(), options, png_path, "reliability diagram"));
  for (size_t i = 0; i < curves.size(); ++i) {
    const std::string where = "reliability diagram: curve '" + CurveName(curves[i].name, i) + "'";
    if (curves[i].bins.empty()) return Status::InvalidArgument(where + " has no bins");
    int64_t total = 0;
    for (size_t j = 0; j < curves[i].bins.size(); ++j) {
      const calibration::ReliabilityBin& b = curves[i].bins[j];
      const std::string bin = where + ", bin " + std::to_string(j) + ": ";
      if (!(b.mean_prob >= 0 && b.mean_prob <= 1))
        return Status::InvalidArgument(bin + "mean probability " + std::to_string(b.mean_prob) +
                                       " is not in [0, 1]");
      if (!(b.fraction_positive >= 0 && b.fraction_positive <= 1))
        return Status::InvalidArgument(bin + "fraction positive " +
                                       std::to_string(b.fraction_positive) + " is not in [0, 1]");
      if (b.count < 0) return Status::InvalidArgument(bin + "negative count");
      total += b.count;
    }
    if (total == 0) return Status::InvalidArgument(where + " has no pairs (all counts 0)");
  }

  const PlotOptions& o = options;
  Canvas canvas(o.width, o.height);
  const double u = canvas.unit();
  const bool log_odds = o.probability_axis == ProbabilityAxis::kLogOdds;
  Axis prob;
  std::vector<Tick> ticks;
  if (log_odds) {
    prob = LogitRange(curves);
    ticks = internal::LogitTicks(prob.lo, prob.hi);
  } else {
    ticks = internal::LinearTicks(0, 1, 0.1, 1);
    // Label every other line: 0.1 steps are grid, 0.2 steps are read.
    for (size_t i = 0; i < ticks.size(); ++i)
      if (i % 2 == 1) ticks[i].label.clear();
  }

  const Panel main{internal::ReliabilityDataArea(o), internal::PanelPad(o), prob, prob};
  internal::DrawPanel(canvas, main, ticks, ticks, !o.show_counts);

  // The diagonal of perfect calibration, under the curves.
  const Points diagonal = {{main.Px(prob.lo), main.Py(prob.lo)},
                           {main.Px(prob.hi), main.Py(prob.hi)}};
  DrawLine(canvas, diagonal, kReferenceColor, 1.6, 7);

  Points avoid;
  internal::SamplePolyline(diagonal, 4 * u, &avoid);
  const Points drawn = DrawCurves(canvas, main, curves, 5.5 * u, 2.2);
  avoid.insert(avoid.end(), drawn.begin(), drawn.end());

  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < curves.size(); ++i) {
    // ECE from the bins: the same sum MeasureCalibration computes.
    double total = 0, gap = 0;
    for (const auto& b : curves[i].bins) {
      total += double(b.count);
      gap += std::fabs(b.mean_prob - b.fraction_positive) * double(b.count);
    }
    legend.push_back({CurveName(curves[i].name, i) + "   ECE " + Fixed(gap / total, 3),
                      internal::SeriesColor(int(i)), true, internal::SeriesMarker(int(i)), 0});
  }
  legend.push_back({"perfectly calibrated", kReferenceColor, false, internal::Marker::kCircle, 7});
  const internal::Rect legend_box = internal::DrawLegend(canvas, main, legend, avoid);
  if (!log_odds && o.zoom_inset) {
    const double z = ZoomRange(curves);
    if (z > 0) DrawZoomInset(canvas, main, curves, z, avoid, legend_box);
  }

  internal::Rect x_span = main.data;
  if (o.show_counts) {
    int64_t lo = INT64_MAX, hi = 1;
    for (const ReliabilityCurve& c : curves)
      for (const auto& b : c.bins)
        if (b.count > 0) {
          lo = std::min(lo, b.count);
          hi = std::max(hi, b.count);
        }
    Axis count_axis{std::pow(10.0, std::floor(std::log10(double(lo)))),
                    std::pow(10.0, std::ceil(std::log10(double(hi)))), Scale::kLog10};
    if (count_axis.hi <= count_axis.lo) count_axis.hi = count_axis.lo * 10;
    const Panel counts{internal::CountsDataArea(o), internal::PanelPad(o), prob, count_axis};
    internal::DrawPanel(canvas, counts, ticks, internal::Log10Ticks(count_axis.lo, count_axis.hi),
                        true);
    // One stem per bin, curves side by side, from the panel's floor.
    const double floor_y = counts.Frame().y + counts.Frame().h;
    for (size_t i = 0; i < curves.size(); ++i) {
      const double dx = (double(i) - (double(curves.size()) - 1) / 2) * 4 * u;
      for (const auto& b : curves[i].bins) {
        if (b.count == 0) continue;
        const double x = counts.Px(b.mean_prob) + dx;
        cairo_t* cr = canvas.cr();
        canvas.SetColor(internal::SeriesColor(int(i)), 0.75);
        cairo_set_line_width(cr, 3 * u);
        cairo_move_to(cr, x, floor_y);
        cairo_line_to(cr, x, counts.Py(double(b.count)));
        cairo_stroke(cr);
      }
    }
    canvas.SetColor({0.1, 0.1, 0.1});
    canvas.Text("pairs/bin", 14 * u, counts.data.y + counts.data.h / 2, 14, 0.5, 0, false, true);
    x_span = counts.data;
  }

  DrawLabels(canvas, o, o.title.empty() ? "Reliability diagram" : o.title,
             o.x_label.empty() ? (log_odds ? "mean predicted probability (log-odds scale)"
                                           : "mean predicted probability")
                               : o.x_label,
             x_span, o.y_label.empty() ? "fraction of matching pairs" : o.y_label, main.data);
  return canvas.WritePng(png_path);
}

Status WriteUncertaintyCurve(const std::vector<UncertaintySeries>& series,
                             const PlotOptions& options, const std::string& png_path) {
  HEDGEDB_RETURN_IF_ERROR(CheckCommon(series.size(), options, png_path, "uncertainty curve"));
  const PlotOptions& o = options;
  std::vector<std::vector<UncertaintyPoint>> curves(series.size());
  double y_min = 1, y_max = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    const Status s = UncertaintyCurve(series[i].queries, &curves[i], o.curve);
    if (!s.ok())
      return Status::InvalidArgument("series '" + CurveName(series[i].name, i) +
                                     "': " + s.message());
    for (const UncertaintyPoint& p : curves[i]) {
      y_min = std::min(y_min, p.accuracy);
      y_max = std::max(y_max, p.accuracy);
    }
  }
  // References only when all series rank the same queries: otherwise their
  // flat and oracle lines differ and would only add clutter.
  const auto correct_count = [](const UncertaintySeries& s) {
    return std::count_if(s.queries.begin(), s.queries.end(),
                         [](const QueryOutcome& q) { return q.correct; });
  };
  bool same_queries = true;
  for (const UncertaintySeries& s : series)
    same_queries = same_queries && s.queries.size() == series[0].queries.size() &&
                   correct_count(s) == correct_count(series[0]);
  const bool references = o.show_references && same_queries;
  std::vector<UncertaintyPoint> oracle;
  if (references) {
    HEDGEDB_RETURN_IF_ERROR(OracleUncertaintyCurve(series[0].queries, &oracle, o.curve));
    for (const UncertaintyPoint& p : oracle) y_max = std::max(y_max, p.accuracy);
  }

  // A y range that frames the data with a margin, on round numbers.
  Axis y{std::max(0.0, std::floor((y_min - 0.02) * 20) / 20),
         std::min(1.0, std::ceil((y_max + 0.02) * 20) / 20), Scale::kLinear};
  if (y.hi - y.lo < 0.1) y.lo = std::max(0.0, y.hi - 0.1);
  const double span = y.hi - y.lo;
  const double step = span <= 0.25 ? 0.05 : span <= 0.6 ? 0.1 : 0.2;
  const double x_max = std::max(0.1, std::ceil(o.curve.max_drop * 10 - 1e-9) / 10);
  const Axis x{0, x_max, Scale::kLinear};

  Canvas canvas(o.width, o.height);
  const double u = canvas.unit();
  const Panel panel{internal::UncertaintyDataArea(o), internal::PanelPad(o), x, y};
  internal::DrawPanel(canvas, panel, internal::LinearTicks(0, x_max, 0.1, 1),
                      internal::LinearTicks(y.lo, y.hi, step, 2), true);

  Points avoid;
  std::vector<LegendEntry> legend;
  const auto to_pixels = [&](const std::vector<UncertaintyPoint>& c) {
    Points pts;
    for (const UncertaintyPoint& p : c)
      pts.push_back({panel.Px(p.fraction_dropped), panel.Py(p.accuracy)});
    return pts;
  };
  if (references) {
    const Points oracle_line = to_pixels(oracle);
    const Points flat = {{panel.Px(0), panel.Py(oracle.front().accuracy)},
                         {panel.Px(x_max), panel.Py(oracle.front().accuracy)}};
    DrawLine(canvas, oracle_line, kReferenceColor, 1.6, 3);
    DrawLine(canvas, flat, kReferenceColor, 1.6, 8);
    internal::SamplePolyline(oracle_line, 4 * u, &avoid);
    internal::SamplePolyline(flat, 4 * u, &avoid);
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Color color = internal::SeriesColor(int(i));
    const internal::Marker marker = internal::SeriesMarker(int(i));
    const Points line = to_pixels(curves[i]);
    DrawLine(canvas, line, color, 2.2);
    for (const auto& p : line) DrawMarker(canvas, marker, p.first, p.second, 4.5 * u, color, true);
    internal::SamplePolyline(line, 4 * u, &avoid);
    legend.push_back({CurveName(series[i].name, i), color, true, marker, 0});
  }
  if (references) {
    legend.push_back(
        {"oracle: errors dropped first", kReferenceColor, false, internal::Marker::kCircle, 3});
    legend.push_back({"random drop: " + Fixed(oracle.front().accuracy, 3), kReferenceColor, false,
                      internal::Marker::kCircle, 8});
  }
  internal::DrawLegend(canvas, panel, legend, avoid);

  DrawLabels(canvas, o, o.title.empty() ? "Accuracy as uncertain queries are dropped" : o.title,
             o.x_label.empty() ? "fraction of most uncertain queries dropped" : o.x_label,
             panel.data, o.y_label.empty() ? "precision@1 of the queries kept" : o.y_label,
             panel.data);
  return canvas.WritePng(png_path);
}

}  // namespace report
}  // namespace hedgedb
