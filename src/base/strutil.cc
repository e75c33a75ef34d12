#include "base/strutil.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace pion {

std::optional<uint64_t> ParseUint64Strict(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  if (s.size() > 1 && s[0] == '0') return std::nullopt;
  uint64_t v = 0;
  if (s.size() < 20) {  // at most 19 digits: cannot overflow (every RESP length takes this path)
    for (char c : s) {
      unsigned d = static_cast<unsigned char>(c) - static_cast<unsigned>('0');
      if (d > 9) return std::nullopt;
      v = v * 10 + d;
    }
    return v;
  }
  for (char c : s) {
    unsigned d = static_cast<unsigned char>(c) - static_cast<unsigned>('0');
    if (d > 9) return std::nullopt;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
  }
  return v;
}

std::optional<int64_t> ParseInt64Strict(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty() || (neg && s == "0")) return std::nullopt;
  auto u = ParseUint64Strict(s);
  if (!u) return std::nullopt;
  if (neg) {
    if (*u > static_cast<uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return static_cast<int64_t>(0 - *u);
  }
  if (*u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(*u);
}

std::optional<double> ParseDouble(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] == ' ' || s[0] == '\t') return std::nullopt;
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || errno == ERANGE || std::isnan(v)) return std::nullopt;
  return v;
}

std::optional<uint64_t> ParseBytes(std::string_view s) {
  std::string l = ToLower(s);
  uint64_t mul = 1;
  auto ends = [&](std::string_view suf) {
    return l.size() > suf.size() && l.compare(l.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends("gb")) {
    mul = 1ull << 30;
    l.resize(l.size() - 2);
  } else if (ends("mb")) {
    mul = 1ull << 20;
    l.resize(l.size() - 2);
  } else if (ends("kb")) {
    mul = 1ull << 10;
    l.resize(l.size() - 2);
  } else if (ends("g")) {
    mul = 1000000000ull;
    l.resize(l.size() - 1);
  } else if (ends("m")) {
    mul = 1000000ull;
    l.resize(l.size() - 1);
  } else if (ends("k")) {
    mul = 1000ull;
    l.resize(l.size() - 1);
  }
  auto v = ParseUint64Strict(l);
  if (!v) return std::nullopt;
  if (*v != 0 && mul > UINT64_MAX / *v) return std::nullopt;
  return *v * mul;
}

namespace {
inline char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (Lower(a[i]) != Lower(b[i])) return false;
  return true;
}

std::string ToLower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = Lower(c);
  return r;
}

std::string ToUpper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return r;
}

namespace {
// One pattern token at p (not '*') against the byte c: whether it matches, and where
// the next token starts. A '[' class without its ']' runs to the end of the pattern,
// and a trailing '\\' stands for itself, as Redis' stringmatchlen reads them.
inline bool TokenMatches(const char*& p, const char* pe, char c, bool nocase) {
  switch (*p) {
    case '?':
      ++p;
      return true;
    case '[': {
      ++p;
      bool neg = p < pe && *p == '^';
      if (neg) ++p;
      bool hit = false;
      while (p < pe && *p != ']') {
        if (*p == '\\' && p + 1 < pe) {
          ++p;
          if (*p == c) hit = true;
        } else if (p + 2 < pe && p[1] == '-') {
          char a = p[0], b = p[2];
          if (a > b) std::swap(a, b);
          char x = c;
          if (nocase) {
            x = Lower(x);
            a = Lower(a);
            b = Lower(b);
          }
          if (x >= a && x <= b) hit = true;
          p += 2;
        } else if (nocase ? Lower(*p) == Lower(c) : *p == c) {
          hit = true;
        }
        ++p;
      }
      if (p < pe) ++p;  // the ']'
      return neg ? !hit : hit;
    }
    case '\\':
      if (p + 1 < pe) ++p;
      [[fallthrough]];
    default: {
      bool eq = nocase ? Lower(*p) == Lower(c) : *p == c;
      ++p;
      return eq;
    }
  }
}

// Star groups ("*", "**", ...) followed by another token: how deep Redis'
// recursive stringmatchlen nests on the way to a match.
size_t NestedStars(std::string_view pattern) {
  const char* p = pattern.data();
  const char* const pe = p + pattern.size();
  size_t n = 0;
  while (p < pe) {
    if (*p == '*') {
      while (p < pe && *p == '*') ++p;
      if (p < pe) ++n;
      continue;
    }
    TokenMatches(p, pe, '\0', false);  // only to step over the token
  }
  return n;
}
}  // namespace

// Iterative matching with one backtrack point, the last '*' seen: every token other
// than '*' consumes exactly one byte, so when a later token fails it is enough to let
// the last star absorb one more byte and retry from just after it (an earlier star
// could only absorb bytes the last one can absorb too). Each retry advances the
// star's start, so the work is at most (pattern + 1) x (string + 1) token steps:
// a pattern like "a*a*a*...b" costs a product, never the exponential of recursing
// once per star (Redis CVE-2022-36021).
bool GlobMatch(std::string_view pattern, std::string_view str, bool nocase, uint64_t* steps) {
  const char* p = pattern.data();
  const char* const pe = p + pattern.size();
  const char* s = str.data();
  const char* const se = s + str.size();
  const char* star_p = nullptr;  // the token after the last '*'
  const char* star_s = nullptr;  // where that star's absorbed bytes end
  uint64_t n = 0;
  bool matched;
  for (;;) {
    ++n;
    if (p < pe && *p == '*') {
      while (p < pe && *p == '*') ++p;
      if (p == pe) {
        matched = true;
        break;
      }
      star_p = p;
      star_s = s;
      continue;
    }
    if (s == se) {
      // Trailing stars were skipped above; any other token left over needs more
      // bytes than a later start of the star would leave, so this is final.
      matched = p == pe;
      break;
    }
    if (p < pe && TokenMatches(p, pe, *s, nocase)) {
      ++s;
      continue;
    }
    if (!star_p) {
      matched = false;
      break;
    }
    p = star_p;
    s = ++star_s;
  }
  if (steps) *steps += n;
  // As Redis: a match nesting more than 1000 star groups is refused (its guard
  // against abusive patterns; a non-final star group and the token after it
  // take 2 bytes at least, so only long patterns are counted).
  constexpr size_t kMaxNestedStars = 1000;
  if (matched && pattern.size() > 2 * kMaxNestedStars && NestedStars(pattern) > kMaxNestedStars)
    matched = false;
  return matched;
}

void AppendRepr(std::string* out, std::string_view s, bool quoted) {
  static const char kHex[] = "0123456789abcdef";
  if (quoted) out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\a':
        out->append("\\a");
        break;
      case '\b':
        out->append("\\b");
        break;
      default:
        if (c == '"' && quoted) {
          out->append("\\\"");
        } else if (c >= 0x20 && c < 0x7f) {
          out->push_back(static_cast<char>(c));
        } else {
          out->append("\\x");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        }
    }
  }
  if (quoted) out->push_back('"');
}

}  // namespace pion
