#pragma once
// The loss curves of a training run as an SVG picture a browser shows: training and validation loss
// against step, with axes, ticks and a legend. No library: SVG is text.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace samples {

struct Curve {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (step, loss)
};

inline void write_loss_curve_svg(const std::string& path, const std::vector<Curve>& curves, const std::string& title) {
  constexpr double W = 720, H = 420, L = 70, R = 20, T = 40, B = 50;  // size and margins
  double x_max = 1, y_min = 1e300, y_max = -1e300;
  for (const Curve& c : curves)
    for (auto [x, y] : c.points) {
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  if (y_min > y_max) y_min = 0, y_max = 1;
  if (y_max - y_min < 1e-9) y_max = y_min + 1;
  double pad = (y_max - y_min) * 0.05;
  y_min = std::max(0.0, y_min - pad), y_max += pad;
  auto sx = [&](double x) { return L + (W - L - R) * x / x_max; };
  auto sy = [&](double y) { return H - B - (H - T - B) * (y - y_min) / (y_max - y_min); };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
      W, H, W / 2, title);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, T, L, H - B);
  for (int i = 0; i <= 5; ++i) {
    double x = x_max * i / 5, y = y_min + (y_max - y_min) * i / 5;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", sx(x), H - B + 18, x);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2f}</text>\n", L - 6, sy(y) + 4, y);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", L, sy(y), W - R, sy(y));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 12);
  s += fmt::format("<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">loss</text>\n",
                   (T + H - B) / 2, (T + H - B) / 2);
  for (size_t i = 0; i < curves.size(); ++i) {
    const Curve& c = curves[i];
    std::string pts;
    for (auto [x, y] : c.points) pts += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", c.color, pts);
    double ly = T + 10 + 18 * double(i);
    s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>\n", W - R - 150, ly,
                     W - R - 125, ly, c.color);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - R - 118, ly + 4, c.name);
  }
  s += "</svg>\n";
  std::ofstream out(path);
  out << s;
  if (!out) kiln::fail("train_gpt: cannot write {}", path);
}

}  // namespace samples
