// Drawing helpers of the report pictures: a Cairo image surface with text,
// axes, markers and a legend that avoids the data. Internal to
// hedgedb_report; tests use the layout functions to find the plot area.
#pragma once

#include <cairo.h>

#include <string>
#include <utility>
#include <vector>

#include "hedgedb/status.h"
#include "report/plots.h"

namespace hedgedb {
namespace report {
namespace internal {

// The scale of a picture: line widths and font sizes are given for an
// 800 x 800 picture and multiplied by this (at least 0.6).
double Unit(int width, int height);

struct Color {
  double r = 0, g = 0, b = 0;
};

// Okabe-Ito colours and distinct markers: curves stay apart for colour-blind
// readers and in greyscale print.
Color SeriesColor(int i);
enum class Marker { kCircle, kSquare, kTriangle, kDiamond, kTriangleDown };
Marker SeriesMarker(int i);

enum class Scale { kLinear, kLogit, kLog10 };

// A data interval [lo, hi] on a linear, logit or log10 scale.
struct Axis {
  double lo = 0, hi = 1;
  Scale scale = Scale::kLinear;
  // Values outside [lo, hi] are pinned to its ends; a zoomed panel turns this
  // off and clips instead.
  bool clamp = true;
  double Transform(double v) const;
  // 0 at lo, 1 at hi.
  double Fraction(double v) const;
};

struct Rect {
  double x = 0, y = 0, w = 0, h = 0;  // pixels, y downwards
};

// A plot panel: `data` is where [lo, hi] of both axes land; the frame is
// drawn `pad` pixels outside it, so markers at the ends of the range are not
// cut in half by the frame.
struct Panel {
  Rect data;
  double pad = 0;
  Axis x, y;
  double Px(double v) const { return data.x + x.Fraction(v) * data.w; }
  double Py(double v) const { return data.y + data.h - y.Fraction(v) * data.h; }
  Rect Frame() const { return {data.x - pad, data.y - pad, data.w + 2 * pad, data.h + 2 * pad}; }
};

struct Tick {
  double value = 0;
  std::string label;  // "" = a minor tick: grid line only
};

std::vector<Tick> LinearTicks(double lo, double hi, double step, int decimals);
// Probabilities at decades and their complements, 0.5, plus minor grid lines.
std::vector<Tick> LogitTicks(double lo, double hi);
std::vector<Tick> Log10Ticks(double lo, double hi);

class Canvas {
 public:
  Canvas(int width, int height);  // white background
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() const { return cr_; }
  // Unit(width, height): a larger picture is the same drawing, sharper.
  double unit() const { return unit_; }
  void SetColor(Color c, double alpha = 1) const;
  // Text whose box has the point (ax, ay) (fractions of its width and height,
  // 0 = left/top) at (x, y); vertical text reads bottom to top.
  void Text(const std::string& text, double x, double y, double size, double ax, double ay,
            bool bold = false, bool vertical = false) const;
  double TextWidth(const std::string& text, double size, bool bold = false) const;
  // Encodes the picture as PNG and writes it atomically.
  Status WritePng(const std::string& path) const;

 private:
  cairo_surface_t* surface_ = nullptr;
  cairo_t* cr_ = nullptr;
  double unit_ = 1;
};

// Frame, grid, ticks and tick labels of a panel; x tick labels only when
// asked (panels stacked over a shared x axis).
void DrawPanel(const Canvas& canvas, const Panel& panel, const std::vector<Tick>& x_ticks,
               const std::vector<Tick>& y_ticks, bool x_tick_labels, double font = 14);
void DrawMarker(const Canvas& canvas, Marker marker, double x, double y, double radius, Color color,
                bool filled);
// A polyline through the points (pixels), solid or dashed.
void DrawLine(const Canvas& canvas, const std::vector<std::pair<double, double>>& points,
              Color color, double width, double dash = 0);

struct LegendEntry {
  std::string label;
  Color color;
  bool has_marker = false;
  Marker marker = Marker::kCircle;
  double dash = 0;  // 0 = solid line sample
};
// Where a w x h box inside the panel's frame covers the fewest of `avoid`
// (pixel points sampled along the drawn data) and overlaps none of `taken`:
// the top-left corner of the box, and the number of points it covers.
// Corners are tried first (top-left, bottom-right, top-right, bottom-left),
// then a grid of positions; ties go to the earlier one.
std::pair<double, double> PlaceBox(const Canvas& canvas, const Panel& panel, double w, double h,
                                   const std::vector<std::pair<double, double>>& avoid,
                                   const std::vector<Rect>& taken, size_t* covered);
// Draws the legend where PlaceBox puts it; returns its box.
Rect DrawLegend(const Canvas& canvas, const Panel& panel, const std::vector<LegendEntry>& entries,
                const std::vector<std::pair<double, double>>& avoid);
// Points every few pixels along a polyline, for DrawLegend's `avoid`.
void SamplePolyline(const std::vector<std::pair<double, double>>& points, double spacing,
                    std::vector<std::pair<double, double>>* out);

// Where the data of the main panel of each picture lands (no data needed).
Rect ReliabilityDataArea(const PlotOptions& options);
Rect CountsDataArea(const PlotOptions& options);
Rect UncertaintyDataArea(const PlotOptions& options);
// The pixel padding between a panel's data area and its frame.
double PanelPad(const PlotOptions& options);

}  // namespace internal
}  // namespace report
}  // namespace hedgedb
