// LOLWUT [VERSION v] [args...]: computer art and the version, as Redis 7.0 draws
// it. Version 5: Georg Nees's "Schotter" (squares that rotate and drift more
// row after row) in Braille characters, args columns, squares per row, squares
// per column; version 6: an 8-bit city skyline in four grays of ANSI colours,
// args columns, rows; any other version: the version line alone. The art is
// random, as Redis's is.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/commands/command_table.h"

namespace pion::server {

namespace {

// The version INFO reports (redis_version) and LOLWUT prints.
constexpr std::string_view kVersionLine = "Redis ver. 7.0.0\n";

class Canvas {
 public:
  Canvas(int w, int h, uint8_t bg) : w_(w), h_(h), px_(static_cast<size_t>(w) * h, bg) {}
  int width() const { return w_; }
  int height() const { return h_; }
  void Set(int x, int y, uint8_t c) {
    if (x >= 0 && x < w_ && y >= 0 && y < h_) px_[static_cast<size_t>(y) * w_ + x] = c;
  }
  uint8_t Get(int x, int y) const {
    return (x >= 0 && x < w_ && y >= 0 && y < h_) ? px_[static_cast<size_t>(y) * w_ + x] : 0;
  }
  // Bresenham's line.
  void Line(int x0, int y0, int x1, int y1, uint8_t c) {
    const int dx = std::abs(x1 - x0), dy = std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx - dy;
    for (;;) {
      Set(x0, y0, c);
      if (x0 == x1 && y0 == y1) return;
      const int e2 = 2 * err;
      if (e2 > -dy) err -= dy, x0 += sx;
      if (e2 < dx) err += dx, y0 += sy;
    }
  }
  // A square of side `side` centred on (x, y), turned by `angle` radians.
  void Square(int x, int y, float side, float angle, uint8_t c) {
    const float r = std::round(side / 1.4142135623f);  // the corners' distance from the centre
    int px[4], py[4];
    float k = static_cast<float>(M_PI / 4) + angle;
    for (int j = 0; j < 4; ++j, k += static_cast<float>(M_PI / 2)) {
      px[j] = static_cast<int>(std::round(std::sin(k) * r + x));
      py[j] = static_cast<int>(std::round(std::cos(k) * r + y));
    }
    for (int j = 0; j < 4; ++j) Line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], c);
  }

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

std::mt19937& Rng() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return rng;
}
float Unit() { return std::uniform_real_distribution<float>(0.0f, 1.0f)(Rng()); }
int Below(int n) { return n > 0 ? static_cast<int>(Rng()() % static_cast<unsigned>(n)) : 0; }

std::string Schotter(int cols, int per_row, int per_col) {
  const int width = cols * 2;
  const int pad = width > 4 ? 2 : 0;
  const float side = static_cast<float>(width - pad * 2) / per_row;
  Canvas cv(width, static_cast<int>(side * per_col + pad * 2), 0);
  for (int y = 0; y < per_col; ++y) {
    for (int x = 0; x < per_row; ++x) {
      int sx = static_cast<int>(x * side + side / 2 + pad);
      int sy = static_cast<int>(y * side + side / 2 + pad);
      float angle = 0;
      if (y > 1) {  // the lower the row, the more disorder
        auto wobble = [&] {
          float v = Unit() / per_col * y;
          return Below(2) ? -v : v;
        };
        angle = wobble();
        sx += static_cast<int>(wobble() * side / 3);
        sy += static_cast<int>(wobble() * side / 3);
      }
      cv.Square(sx, sy, side, angle, 1);
    }
  }
  // Each character is a 2x4 block of pixels as a Braille pattern (U+2800 + dots).
  std::string out;
  for (int y = 0; y < cv.height(); y += 4) {
    for (int x = 0; x < cv.width(); x += 2) {
      static constexpr int kDx[8] = {0, 0, 0, 1, 1, 1, 0, 1};
      static constexpr int kDy[8] = {0, 1, 2, 0, 1, 2, 3, 3};
      int dots = 0;
      for (int b = 0; b < 8; ++b)
        if (cv.Get(x + kDx[b], y + kDy[b])) dots |= 1 << b;
      const int code = 0x2800 + dots;
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
    if (y != cv.height() - 1) out += '\n';
  }
  out += "\nGeorg Nees - schotter, plotter on paper, 1968. ";
  out += kVersionLine;
  return out;
}

void Skyscraper(Canvas& cv, int xoff, int width, int height, bool windows, uint8_t color) {
  const int bottom = cv.height() - 1, top = bottom - height + 1;
  for (int y = bottom; y >= top; --y) {
    for (int x = xoff; x < xoff + width; ++x) {
      if (y == top && (x <= xoff + 1 || x >= xoff + width - 2)) continue;  // a narrower roof
      uint8_t c = color;
      if (windows && x > xoff + 1 && x < xoff + width - 2 && y > top + 1 && y < bottom - 1) {
        const int rx = x - (xoff + 1), ry = y - (top + 1);
        // Windows two pixels wide, one tall, of one gray each.
        if ((rx / 2) % 2 && ry % 2) {
          do c = static_cast<uint8_t>(1 + Below(2));
          while (c == color);
          if (rx % 2) c = cv.Get(x - 1, y);
        }
      }
      cv.Set(x, y, c);
    }
  }
}

std::string Skyline(int cols, int rows) {
  Canvas cv(cols, rows, 3);
  const int h = cv.height();
  for (int color = 2; color >= 1; --color) {  // the lighter grays behind
    for (int off = -10; off < cv.width();) {
      off += Below(8);
      const int w = 10 + Below(9);
      const int height = h / 2 + (color == 2 ? Below(h) / 2 : Below(h) / 3);
      Skyscraper(cv, off, w, height, false, static_cast<uint8_t>(color));
      off += color == 2 ? w / 2 : w + 1;
    }
  }
  for (int off = -10; off < cv.width();) {  // the black ones in front, with windows
    off += Below(8);
    int w = 5 + Below(14);
    if (w % 4) w += w % 3;
    Skyscraper(cv, off, w, h / 3 + Below(h) / 2, true, 0);
    off += w + 5;
  }
  static const char* const kColor[4] = {"0;30;40m", "0;90;100m", "0;37;47m", "0;97;107m"};
  std::string out;
  for (int y = 0; y < cv.height(); ++y) {
    for (int x = 0; x < cv.width(); ++x) {
      out += "\033[";
      out += kColor[cv.Get(x, y) & 3];
      out += " \033[0m";
    }
    if (y != cv.height() - 1) out += '\n';
  }
  out +=
      "\nDedicated to the 8 bit game developers of past and present.\n"
      "Original 8 bit image from Plaguemon by hikikomori. ";
  out += kVersionLine;
  return out;
}

void Lolwut(CommandContext& ctx) {
  std::span<const std::string_view> a = ctx.args;
  long version = 7;  // pion answers as Redis 7.0
  if (a.size() >= 3 && EqualsIgnoreCase(a[1], "VERSION")) {
    auto v = ParseInt64Strict(a[2]);
    if (!v) return ctx.reply->Error(kErrNotInteger);
    version = static_cast<long>(static_cast<unsigned>(*v));  // as Redis prints it ("%u.0.0")
    a = a.subspan(2);
  }
  // The version's own arguments (integers, clamped as Redis clamps them); the
  // version line alone takes none.
  long n[3] = {0, 0, 0};
  const size_t want = version == 5 ? 3 : version == 6 ? 2 : 0;
  size_t got = 0;
  for (; got < want && got + 1 < a.size(); ++got) {
    auto v = ParseInt64Strict(a[got + 1]);
    if (!v) return ctx.reply->Error(kErrNotInteger);
    n[got] = static_cast<long>(*v);
  }
  auto arg = [&](size_t i, long def, long lo, long hi) {
    long v = i < got ? n[i] : def;
    return static_cast<int>(v < lo ? lo : v > hi ? hi : v);
  };
  if (version == 5) {
    ctx.reply->Verbatim(Schotter(arg(0, 66, 1, 1000), arg(1, 8, 1, 200), arg(2, 12, 1, 200)));
  } else if (version == 6) {
    ctx.reply->Verbatim(Skyline(arg(0, 80, 1, 1000), arg(1, 20, 1, 1000)));
  } else {
    ctx.reply->Verbatim(kVersionLine);
  }
}

}  // namespace

void AddLolwutCommands(std::vector<CommandSpec>* out) {
  out->push_back({"LOLWUT", -1, kCmdReadonly | kCmdFast, 0, 0, 0, Lolwut,
                  "Computer art and the Redis version pion answers as.", "server", "5.0.0",
                  "[VERSION version]"});
}

}  // namespace pion::server
