#include "report/draw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "common/file_util.h"

namespace hedgedb {
namespace report {
namespace internal {
namespace {

constexpr const char* kFont = "DejaVu Sans";  // falls back through fontconfig
const Color kAxisColor{0.15, 0.15, 0.15};
const Color kGridColor{0.88, 0.88, 0.88};

double Logit(double p) { return std::log(p / (1 - p)); }

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// A probability tick label: "0.01", "0.999", "1e-4", "1-1e-5".
std::string ProbabilityLabel(double p) {
  if (p >= 1e-3 && p <= 1 - 1e-3 + 1e-12) return Format("%g", p);
  if (p < 0.5) return Format("1e%.0f", std::log10(p));
  return "1-" + Format("1e%.0f", std::log10(1 - p));
}

// Vertical page margins shared by the layouts: title above, x label below.
struct Margins {
  double left, right, top, bottom;
};
Margins PageMargins(const PlotOptions& o) {
  const double u = Unit(o.width, o.height);
  return {92 * u, 28 * u, 64 * u, 76 * u};
}

}  // namespace

double Unit(int width, int height) {
  // Not below 0.6: smaller fonts than ~8 px are not readable.
  return std::max(0.6, std::sqrt(double(width) * double(height)) / 800);
}

Color SeriesColor(int i) {
  static const Color kColors[] = {{0.835, 0.369, 0.0},   {0.0, 0.447, 0.698}, {0.0, 0.620, 0.451},
                                  {0.800, 0.475, 0.655}, {0.902, 0.624, 0.0}, {0.337, 0.706, 0.914},
                                  {0.941, 0.894, 0.259}, {0.3, 0.3, 0.3}};
  return kColors[i % 8];
}

Marker SeriesMarker(int i) {
  static const Marker kMarkers[] = {Marker::kCircle, Marker::kSquare, Marker::kTriangle,
                                    Marker::kDiamond, Marker::kTriangleDown};
  return kMarkers[i % 5];
}

double Axis::Transform(double v) const {
  switch (scale) {
    case Scale::kLogit:
      return Logit(v);
    case Scale::kLog10:
      return std::log10(v);
    case Scale::kLinear:
      break;
  }
  return v;
}

double Axis::Fraction(double v) const {
  if (clamp) v = std::clamp(v, lo, hi);
  return (Transform(v) - Transform(lo)) / (Transform(hi) - Transform(lo));
}

std::vector<Tick> LinearTicks(double lo, double hi, double step, int decimals) {
  std::vector<Tick> ticks;
  const char* fmt = decimals <= 0 ? "%.0f" : decimals == 1 ? "%.1f" : "%.2f";
  for (long k = std::lround(std::ceil(lo / step - 1e-9)); k * step <= hi + 1e-9; ++k)
    ticks.push_back({k * step, Format(fmt, k * step)});
  return ticks;
}

std::vector<Tick> LogitTicks(double lo, double hi) {
  std::vector<Tick> ticks;
  for (int e = -9; e <= -1; ++e) {
    const double p = std::pow(10.0, e);
    for (double v : {p, 1 - p})
      if (v >= lo * (1 - 1e-9) && v <= hi + 1e-12) ticks.push_back({v, ProbabilityLabel(v)});
    // Minor grid lines at 2x and 5x the decade (and their complements).
    for (double m : {2.0, 5.0})
      for (double v : {m * p, 1 - m * p})
        if (m * p < 0.5 && v > lo && v < hi) ticks.push_back({v, ""});
  }
  if (lo < 0.5 && hi > 0.5) ticks.push_back({0.5, "0.5"});
  std::sort(ticks.begin(), ticks.end(),
            [](const Tick& a, const Tick& b) { return a.value < b.value; });
  return ticks;
}

std::vector<Tick> Log10Ticks(double lo, double hi) {
  std::vector<Tick> ticks;
  for (int e = int(std::floor(std::log10(lo) + 1e-9)); e <= int(std::ceil(std::log10(hi))); ++e) {
    const double v = std::pow(10.0, e);
    if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9)) continue;
    ticks.push_back({v, e < 6 ? Format("%.0f", v) : Format("1e%.0f", double(e))});
  }
  return ticks;
}

Canvas::Canvas(int width, int height) {
  surface_ = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  cr_ = cairo_create(surface_);
  unit_ = Unit(width, height);
  cairo_set_source_rgb(cr_, 1, 1, 1);
  cairo_paint(cr_);
}

Canvas::~Canvas() {
  cairo_destroy(cr_);
  cairo_surface_destroy(surface_);
}

void Canvas::SetColor(Color c, double alpha) const {
  cairo_set_source_rgba(cr_, c.r, c.g, c.b, alpha);
}

void Canvas::Text(const std::string& text, double x, double y, double size, double ax, double ay,
                  bool bold, bool vertical) const {
  cairo_save(cr_);
  cairo_select_font_face(cr_, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, size * unit_);
  cairo_text_extents_t te;
  cairo_text_extents(cr_, text.c_str(), &te);
  cairo_font_extents_t fe;
  cairo_font_extents(cr_, &fe);
  // Anchor on the font's ascent and descent, not on the glyphs' ink, so
  // labels of one row share a baseline.
  const double box_h = fe.ascent + fe.descent;
  cairo_translate(cr_, x, y);
  if (vertical) cairo_rotate(cr_, -M_PI / 2);
  cairo_move_to(cr_, -ax * te.x_advance, -ay * box_h + fe.ascent);
  cairo_show_text(cr_, text.c_str());
  cairo_restore(cr_);
}

double Canvas::TextWidth(const std::string& text, double size, bool bold) const {
  cairo_save(cr_);
  cairo_select_font_face(cr_, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, size * unit_);
  cairo_text_extents_t te;
  cairo_text_extents(cr_, text.c_str(), &te);
  cairo_restore(cr_);
  return te.x_advance;
}

Status Canvas::WritePng(const std::string& path) const {
  cairo_surface_flush(surface_);
  if (cairo_status(cr_) != CAIRO_STATUS_SUCCESS)
    return Status::Internal(std::string("drawing failed: ") +
                            cairo_status_to_string(cairo_status(cr_)));
  std::string png;
  const cairo_status_t s = cairo_surface_write_to_png_stream(surface_, AppendToString, &png);
  if (s != CAIRO_STATUS_SUCCESS)
    return Status::Internal(std::string("PNG encoding failed: ") + cairo_status_to_string(s));
  return WriteFileAtomically(path, {png});
}

void DrawPanel(const Canvas& canvas, const Panel& panel, const std::vector<Tick>& x_ticks,
               const std::vector<Tick>& y_ticks, bool x_tick_labels, double font) {
  cairo_t* cr = canvas.cr();
  const double u = canvas.unit();
  const Rect f = panel.Frame();
  cairo_save(cr);
  // Grid first, under everything; minor lines lighter.
  cairo_set_line_width(cr, 1 * u);
  for (const Tick& t : x_ticks) {
    canvas.SetColor(kGridColor, t.label.empty() ? 0.5 : 1);
    cairo_move_to(cr, panel.Px(t.value), f.y);
    cairo_line_to(cr, panel.Px(t.value), f.y + f.h);
    cairo_stroke(cr);
  }
  for (const Tick& t : y_ticks) {
    canvas.SetColor(kGridColor, t.label.empty() ? 0.5 : 1);
    cairo_move_to(cr, f.x, panel.Py(t.value));
    cairo_line_to(cr, f.x + f.w, panel.Py(t.value));
    cairo_stroke(cr);
  }
  canvas.SetColor(kAxisColor);
  cairo_set_line_width(cr, 1.2 * u);
  cairo_rectangle(cr, f.x, f.y, f.w, f.h);
  cairo_stroke(cr);
  const double tick_len = font / 14 * 6 * u;
  for (const Tick& t : x_ticks) {
    if (t.label.empty()) continue;
    cairo_move_to(cr, panel.Px(t.value), f.y + f.h);
    cairo_line_to(cr, panel.Px(t.value), f.y + f.h + tick_len);
    cairo_stroke(cr);
    if (x_tick_labels)
      canvas.Text(t.label, panel.Px(t.value), f.y + f.h + tick_len + 3 * u, font, 0.5, 0);
  }
  for (const Tick& t : y_ticks) {
    if (t.label.empty()) continue;
    cairo_move_to(cr, f.x, panel.Py(t.value));
    cairo_line_to(cr, f.x - tick_len, panel.Py(t.value));
    cairo_stroke(cr);
    canvas.Text(t.label, f.x - tick_len - 4 * u, panel.Py(t.value), font, 1, 0.5);
  }
  cairo_restore(cr);
}

void DrawMarker(const Canvas& canvas, Marker marker, double x, double y, double r, Color color,
                bool filled) {
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_new_path(cr);
  switch (marker) {
    case Marker::kCircle:
      cairo_arc(cr, x, y, r, 0, 2 * M_PI);
      break;
    case Marker::kSquare:
      cairo_rectangle(cr, x - 0.9 * r, y - 0.9 * r, 1.8 * r, 1.8 * r);
      break;
    case Marker::kTriangle:
    case Marker::kTriangleDown: {
      const double s = marker == Marker::kTriangle ? 1 : -1;
      cairo_move_to(cr, x, y - s * 1.2 * r);
      cairo_line_to(cr, x + 1.1 * r, y + s * 0.8 * r);
      cairo_line_to(cr, x - 1.1 * r, y + s * 0.8 * r);
      break;
    }
    case Marker::kDiamond:
      cairo_move_to(cr, x, y - 1.25 * r);
      cairo_line_to(cr, x + 1.1 * r, y);
      cairo_line_to(cr, x, y + 1.25 * r);
      cairo_line_to(cr, x - 1.1 * r, y);
      break;
  }
  cairo_close_path(cr);
  // A white fill behind hollow markers and a white rim around filled ones
  // keep markers readable on top of lines and each other.
  if (filled) {
    canvas.SetColor(color);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 0.35 * r);
  } else {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_fill_preserve(cr);
    canvas.SetColor(color);
    cairo_set_line_width(cr, 0.4 * r);
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

void DrawLine(const Canvas& canvas, const std::vector<std::pair<double, double>>& points,
              Color color, double width, double dash) {
  if (points.size() < 2) return;
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  canvas.SetColor(color);
  cairo_set_line_width(cr, width * canvas.unit());
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, dash > 0 ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
  if (dash > 0) {
    const double d = dash * canvas.unit();
    cairo_set_dash(cr, &d, 1, 0);
  }
  cairo_move_to(cr, points[0].first, points[0].second);
  for (size_t i = 1; i < points.size(); ++i) cairo_line_to(cr, points[i].first, points[i].second);
  cairo_stroke(cr);
  cairo_restore(cr);
}

void SamplePolyline(const std::vector<std::pair<double, double>>& points, double spacing,
                    std::vector<std::pair<double, double>>* out) {
  for (size_t i = 0; i < points.size(); ++i) {
    out->push_back(points[i]);
    if (i + 1 == points.size()) break;
    const double dx = points[i + 1].first - points[i].first;
    const double dy = points[i + 1].second - points[i].second;
    const int n = int(std::hypot(dx, dy) / spacing);
    for (int k = 1; k < n; ++k)
      out->push_back({points[i].first + dx * k / n, points[i].second + dy * k / n});
  }
}

std::pair<double, double> PlaceBox(const Canvas& canvas, const Panel& panel, double w, double h,
                                   const std::vector<std::pair<double, double>>& avoid,
                                   const std::vector<Rect>& taken, size_t* covered) {
  const double u = canvas.unit();
  const Rect f = panel.Frame();
  const double m = 10 * u;  // distance from the frame
  const double x_lo = f.x + m, x_hi = f.x + f.w - m - w, y_lo = f.y + m, y_hi = f.y + f.h - m - h;
  // Corners first: top-left and bottom-right are off the diagonal, where a
  // reliability diagram has the least data.
  std::vector<std::pair<double, double>> candidates = {
      {x_lo, y_lo}, {x_hi, y_hi}, {x_hi, y_lo}, {x_lo, y_hi}};
  constexpr int kGrid = 16;
  for (int j = 0; j <= kGrid; ++j)
    for (int i = 0; i <= kGrid; ++i)
      candidates.push_back({x_lo + (x_hi - x_lo) * i / kGrid, y_lo + (y_hi - y_lo) * j / kGrid});
  // A margin around the box: a line just outside it still looks covered.
  const double margin = 12 * u;
  std::pair<double, double> best = candidates[0];
  size_t best_hits = SIZE_MAX;
  for (const auto& c : candidates) {
    const double x0 = c.first - margin, y0 = c.second - margin;
    const double x1 = c.first + w + margin, y1 = c.second + h + margin;
    bool overlaps = false;
    for (const Rect& t : taken)
      overlaps = overlaps || (x0 < t.x + t.w && t.x < x1 && y0 < t.y + t.h && t.y < y1);
    if (overlaps) continue;
    size_t hits = 0;
    for (const auto& p : avoid)
      if (p.first >= x0 && p.first <= x1 && p.second >= y0 && p.second <= y1) ++hits;
    if (hits < best_hits) {
      best_hits = hits;
      best = c;
    }
  }
  *covered = best_hits;
  return best;
}

Rect DrawLegend(const Canvas& canvas, const Panel& panel, const std::vector<LegendEntry>& entries,
                const std::vector<std::pair<double, double>>& avoid) {
  if (entries.empty()) return {};
  const double u = canvas.unit();
  const double font = 15, row = 24 * u, sample = 34 * u, gap = 8 * u, inner = 10 * u;
  double text_w = 0;
  for (const LegendEntry& e : entries) text_w = std::max(text_w, canvas.TextWidth(e.label, font));
  const double w = inner * 2 + sample + gap + text_w;
  const double h = inner * 2 + row * double(entries.size()) - 4 * u;
  size_t covered = 0;
  const auto corner = PlaceBox(canvas, panel, w, h, avoid, {}, &covered);
  const double x = corner.first, y = corner.second;
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_rectangle(cr, x, y, w, h);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.92);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
  cairo_set_line_width(cr, 1 * u);
  cairo_stroke(cr);
  cairo_restore(cr);
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& e = entries[i];
    const double cy = y + inner + row * double(i) + row / 2 - 2 * u;
    DrawLine(canvas, {{x + inner, cy}, {x + inner + sample, cy}}, e.color, 2.2, e.dash);
    if (e.has_marker)
      DrawMarker(canvas, e.marker, x + inner + sample / 2, cy, 5.5 * u, e.color, true);
    canvas.SetColor(kAxisColor);
    canvas.Text(e.label, x + inner + sample + gap, cy, font, 0, 0.5);
  }
  return {x, y, w, h};
}

double PanelPad(const PlotOptions& o) { return 12 * Unit(o.width, o.height); }

Rect ReliabilityDataArea(const PlotOptions& o) {
  const Margins m = PageMargins(o);
  const double u = Unit(o.width, o.height), pad = PanelPad(o);
  const double plot_h = o.height - m.top - m.bottom;
  // With the counts panel the main panel gives up a fifth of the height and
  // a gap for the shared x axis.
  const double main_h = o.show_counts ? plot_h * 0.78 - 10 * u : plot_h;
  return {m.left + pad, m.top + pad, o.width - m.left - m.right - 2 * pad, main_h - 2 * pad};
}

Rect CountsDataArea(const PlotOptions& o) {
  const Margins m = PageMargins(o);
  const double u = Unit(o.width, o.height), pad = PanelPad(o);
  const double plot_h = o.height - m.top - m.bottom;
  const double top = m.top + plot_h * 0.78 + 10 * u;
  return {m.left + pad, top + pad, o.width - m.left - m.right - 2 * pad,
          m.top + plot_h - top - 2 * pad};
}

Rect UncertaintyDataArea(const PlotOptions& o) {
  const Margins m = PageMargins(o);
  const double pad = PanelPad(o);
  return {m.left + pad, m.top + pad, o.width - m.left - m.right - 2 * pad,
          o.height - m.top - m.bottom - 2 * pad};
}

}  // namespace internal
}  // namespace report
}  // namespace hedgedb
