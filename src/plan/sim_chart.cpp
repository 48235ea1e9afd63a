#include "plan/sim_chart.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace hinge::plan {
namespace {

constexpr double kWidth = 760, kLeft = 70, kRight = 20, kPanel = 150, kGap = 60, kTop = 66;

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

struct Panel {
  double y0;       // top
  double t_max;    // seconds on the x axis
  double v_max;    // value at the top
  double x(double t) const { return kLeft + (kWidth - kLeft - kRight) * (t_max > 0 ? t / t_max : 0); }
  double y(double v) const { return y0 + kPanel - kPanel * (v_max > 0 ? std::min(1.0, v / v_max) : 0); }
};

// A step function through (start_s + seconds, value) of every step.
std::string polyline(const Panel& p, const SimResult& r, double (*value)(const SimStep&),
                     const char* color) {
  std::string pts = fmt::format("{:.1f},{:.1f}", p.x(0), p.y(0));
  for (const SimStep& s : r.trace) {
    const double v = value(s);
    pts += fmt::format(" {:.1f},{:.1f} {:.1f},{:.1f}", p.x(s.start_s), p.y(v),
                       p.x(s.start_s + s.seconds), p.y(v));
  }
  return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     color, pts);
}

std::string axes(const Panel& p, const std::string& label, const std::string& top_label) {
  std::string o = fmt::format(
      "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" "
      "stroke=\"#999\"/>\n", kLeft, p.y0, kWidth - kLeft - kRight, kPanel);
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"13\">{}</text>\n", kLeft,
                   p.y0 - 8, escape(label));
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n",
                   kLeft - 6, p.y0 + 10, escape(top_label));
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" text-anchor=\"end\">0</text>\n",
                   kLeft - 6, p.y0 + kPanel);
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" text-anchor=\"end\">{:.3g} s</text>\n",
                   kWidth - kRight, p.y0 + kPanel + 14, p.t_max);
  return o;
}

// Percentile (x, 0 to 100) against milliseconds (y, log scale) of two sorted samples: TTFT and
// the time between tokens, with the p50 / p90 / p99 lines.
std::string latency_panel(const SimResult& r, double y0) {
  const double x0 = kLeft, x1 = kWidth - kRight;
  double lo = 1e300, hi = 0;
  for (const std::vector<double>* v : {&r.ttft_s, &r.itl_s})
    for (double s : *v)
      if (s > 0) {
        lo = std::min(lo, s * 1e3);
        hi = std::max(hi, s * 1e3);
      }
  std::string o = fmt::format(
      "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" "
      "stroke=\"#999\"/>\n<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"13\">latency by percentile "
      "(log scale): time to first token (red), between tokens (blue)</text>\n",
      x0, y0, x1 - x0, kPanel, x0, y0 - 8);
  if (hi <= 0) return o;
  const double l0 = std::floor(std::log10(lo)), l1 = std::max(l0 + 1, std::ceil(std::log10(hi)));
  auto y = [&](double ms) { return y0 + kPanel * (1 - (std::log10(ms) - l0) / (l1 - l0)); };
  auto x = [&](double pct) { return x0 + (x1 - x0) * pct / 100; };
  for (double d = l0; d <= l1; d += 1)
    o += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:g} ms</text>\n",
                     x0 - 6, y(std::pow(10, d)) + 4, std::pow(10, d));
  for (double pct : {50.0, 90.0, 99.0})
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.0f}\" x2=\"{:.1f}\" y2=\"{:.0f}\" stroke=\"#ddd\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"11\" text-anchor=\"middle\">p{:g}</text>\n",
                     x(pct), y0, x(pct), y0 + kPanel, x(pct), y0 + kPanel + 14, pct);
  const std::pair<const std::vector<double>*, const char*> series[] = {{&r.ttft_s, "#d62728"},
                                                                       {&r.itl_s, "#1f77b4"}};
  for (const auto& [v, color] : series) {
    if (v->empty()) continue;
    // At most ~400 points: the sample at each step of the percentile.
    const size_t n = v->size(), stride = std::max<size_t>(1, n / 400);
    std::string pts;
    for (size_t i = 0; i < n; i += stride) {
      const double ms = std::max((*v)[i] * 1e3, std::pow(10, l0));
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ",
                         x(n > 1 ? 100.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 100), y(ms));
    }
    const double last = std::max(v->back() * 1e3, std::pow(10, l0));
    pts += fmt::format(" {:.1f},{:.1f}", x(100), y(last));
    o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     color, pts);
  }
  return o;
}

}  // namespace

std::string simulation_svg(const SimResult& r, int32_t kv_blocks_total, const std::string& title) {
  const double t_max = std::max(r.seconds, 1e-9);
  const double height = kTop + 4 * (kPanel + kGap) + 10;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
      kWidth, height, kLeft, escape(title));
  o += fmt::format(
      "<text x=\"{:.0f}\" y=\"40\" font-size=\"12\">{:.1f} tok/s over {:.2f} s; TTFT p50 / p99 "
      "{:.1f} / {:.1f} ms; time per output token p50 / p99 {:.2f} / {:.2f} ms</text>\n"
      "<text x=\"{:.0f}\" y=\"56\" font-size=\"12\">{} steps; {} preemptions; prefix hits "
      "{:.1f} %; KV peak {} of {} blocks</text>\n",
      kLeft, r.output_tokens_per_s, r.seconds, r.ttft_p50_s * 1e3, r.ttft_p99_s * 1e3,
      r.itl_p50_s * 1e3, r.itl_p99_s * 1e3, kLeft, r.steps, r.preemptions,
      r.prefix_hit_rate * 100, r.kv_blocks_peak, kv_blocks_total);
  // 1. KV blocks in use, against the cache.
  Panel kv{kTop + 20, t_max, static_cast<double>(std::max(1, kv_blocks_total))};
  o += axes(kv, "KV blocks in use (of the cache)", fmt::format("{}", kv_blocks_total));
  o += polyline(kv, r, [](const SimStep& s) { return static_cast<double>(s.kv_blocks_used); },
                "#1f77b4");
  // 2. Running and waiting requests.
  double req_max = 1;
  for (const SimStep& s : r.trace) req_max = std::max<double>(req_max, s.running + s.waiting);
  Panel rq{kv.y0 + kPanel + kGap, t_max, req_max};
  o += axes(rq, "requests: running (green), waiting (orange)", fmt::format("{:.0f}", req_max));
  o += polyline(rq, r, [](const SimStep& s) { return static_cast<double>(s.running); }, "#2ca02c");
  o += polyline(rq, r, [](const SimStep& s) { return static_cast<double>(s.waiting); }, "#ff7f0e");
  // 3. Where the time went: each step's roofline parts, as a share of the step.
  Panel tm{rq.y0 + kPanel + kGap, t_max, 1.0};
  o += axes(tm, "each step's time: compute (red), weights (blue), KV (purple), the rest (grey)", "100 %");
  for (const SimStep& s : r.trace) {
    if (s.seconds <= 0) continue;
    const double x0 = tm.x(s.start_s), w = std::max(0.3, tm.x(s.start_s + s.seconds) - x0);
    const double parts[] = {s.compute_s, s.weight_s, s.kv_s};
    const char* colors[] = {"#d62728", "#1f77b4", "#9467bd"};
    const double sum = s.compute_s + s.weight_s + s.kv_s;
    // Overlapped parts (a GPU's max) are drawn scaled to the step; the rest is overhead.
    const double scale = sum > s.seconds ? s.seconds / sum : 1.0;
    double y = tm.y0 + kPanel;
    for (int k = 0; k < 3; ++k) {
      const double h = kPanel * parts[k] * scale / s.seconds;
      if (h <= 0) continue;
      y -= h;
      o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                       x0, y, w, h, colors[k]);
    }
    if (y > tm.y0)
      o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#ccc\"/>\n",
                       x0, tm.y0, w, y - tm.y0);
  }
  // 4. Latency by percentile: every request's TTFT and every inter-token gap, log scale.
  o += latency_panel(r, tm.y0 + kPanel + kGap);
  o += "</svg>\n";
  return o;
}

}  // namespace hinge::plan
