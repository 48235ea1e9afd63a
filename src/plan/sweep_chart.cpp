#include "plan/sweep_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace hinge::plan {
namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace

std::string sweep_svg(std::span<const SweepPoint> lines, std::span<const SweepPoint> dots,
                      const std::string& title, const std::string& lines_label,
                      const std::string& dots_label) {
  constexpr double W = 800, H = 460, L = 60, R = 200, T = 56, B = 50;
  double y_max = 1;
  int64_t c_min = INT64_MAX, c_max = 1;
  for (std::span<const SweepPoint> set : {lines, dots})
    for (const SweepPoint& c : set) {
      y_max = std::max(y_max, c.tokens_per_s);
      c_min = std::min(c_min, std::max<int64_t>(1, c.context));
      c_max = std::max(c_max, c.context);
    }
  if (c_min == INT64_MAX) c_min = 1;
  const double lx0 = std::log2(static_cast<double>(c_min));
  const double lx1 = std::max(lx0 + 1, std::log2(static_cast<double>(c_max)));
  auto x = [&](int64_t c) {
    return L + (W - L - R) * (std::log2(static_cast<double>(std::max<int64_t>(1, c))) - lx0) /
                   (lx1 - lx0);
  };
  // tok/s on a log scale: a cell's error is a distance, whatever its speed.
  double y_min = y_max;
  for (std::span<const SweepPoint> set : {lines, dots})
    for (const SweepPoint& c : set)
      if (c.tokens_per_s > 0) y_min = std::min(y_min, c.tokens_per_s);
  const double ly0 = std::floor(std::log10(y_min)), ly1 = std::max(ly0 + 1, std::log10(y_max * 1.25));
  auto y = [&](double v) {
    return T + (H - T - B) * (1 - (std::log10(std::max(v, std::pow(10, ly0))) - ly0) / (ly1 - ly0));
  };
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n"
      "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" "
      "stroke=\"#999\"/>\n"
      "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"12\">decode tok/s (log scale)</text>\n",
      W, H, L, escape(title), L, T, W - L - R, H - T - B, L, T - 8);
  for (double d = ly0; d <= ly1; d += 1) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10, d);
      if (v > std::pow(10, ly1) * 1.001) break;
      o += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:g}</text>\n",
                       L, y(v), W - R, y(v), L - 6, y(v) + 4, v);
    }
  }
  std::vector<int64_t> contexts;
  for (std::span<const SweepPoint> set : {lines, dots})
    for (const SweepPoint& c : set)
      if (std::find(contexts.begin(), contexts.end(), c.context) == contexts.end())
        contexts.push_back(c.context);
  for (int64_t c : contexts)
    o += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", x(c),
        H - B + 16, c);
  o += fmt::format(
      "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"12\">context (tokens, log scale)</text>\n", L,
      H - 12);
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  // One colour per batch, over both sets; the first dtype seen is solid / filled.
  std::vector<int64_t> batches;
  std::string first_dtype;
  for (std::span<const SweepPoint> set : {lines, dots})
    for (const SweepPoint& c : set) {
      if (first_dtype.empty()) first_dtype = c.kv_dtype;
      if (std::find(batches.begin(), batches.end(), c.batch) == batches.end())
        batches.push_back(c.batch);
    }
  auto color = [&](int64_t batch) {
    return kColors[(std::find(batches.begin(), batches.end(), batch) - batches.begin()) % 8];
  };
  std::vector<std::pair<std::string, int64_t>> keys;
  for (const SweepPoint& c : lines)
    if (std::find(keys.begin(), keys.end(), std::make_pair(c.kv_dtype, c.batch)) == keys.end())
      keys.emplace_back(c.kv_dtype, c.batch);
  int k = 0;
  for (const auto& [dtype, batch] : keys) {
    std::string pts;
    for (const SweepPoint& c : lines)
      if (c.kv_dtype == dtype && c.batch == batch)
        pts +=
            fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", x(c.context), y(c.tokens_per_s));
    o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                     color(batch), dtype != first_dtype ? " stroke-dasharray=\"5,3\"" : "", pts);
    o += fmt::format(
        "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"12\" fill=\"{}\">batch {}, {} KV</text>\n",
        W - R + 10, T + 16 + 16 * k, color(batch), batch, escape(dtype));
    ++k;
  }
  for (const SweepPoint& c : dots)
    o += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" stroke=\"{}\" stroke-width=\"1.5\" "
        "fill=\"{}\"/>\n",
        x(c.context), y(c.tokens_per_s), color(c.batch),
        c.kv_dtype == first_dtype ? color(c.batch) : "white");
  double ly = T + 16 + 16 * k + 10;
  if (!lines_label.empty()) {
    o += fmt::format(
        "<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#333\" "
        "stroke-width=\"2\"/><text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"12\">{}</text>\n",
        W - R + 10, ly - 4, W - R + 30, ly - 4, W - R + 36, ly, escape(lines_label));
    ly += 16;
  }
  if (!dots_label.empty() && !dots.empty())
    o += fmt::format(
        "<circle cx=\"{:.0f}\" cy=\"{:.0f}\" r=\"3.5\" fill=\"#333\"/><text x=\"{:.0f}\" "
        "y=\"{:.0f}\" font-size=\"12\">{}</text>\n",
        W - R + 20, ly - 4, W - R + 36, ly, escape(dots_label));
  return o + "</svg>\n";
}

}  // namespace hinge::plan
