// A deliberately simple glob matcher that the tests and the fuzz target compare
// base::GlobMatch with: the pattern is cut into tokens first ('*', or one byte test),
// then a dynamic-programming table over (token, byte) decides. Quadratic in memory,
// so only for short inputs; the token rules are those of Redis' stringmatchlen.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

namespace pion::testing {

struct GlobToken {
  bool star = false;
  bool any = false;       // '?'
  bool is_class = false;  // '[...]'
  bool negated = false;
  char literal = 0;  // the byte of a literal token (escape removed)
  struct Item {
    char lo, hi;
    bool exact;  // an escaped byte inside a class compares case-sensitively
  };
  std::vector<Item> items;  // a class's bytes and ranges
};

inline char GlobLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

inline std::vector<GlobToken> GlobTokens(std::string_view p) {
  std::vector<GlobToken> out;
  size_t i = 0;
  while (i < p.size()) {
    GlobToken t;
    char c = p[i];
    if (c == '*') {
      t.star = true;
      ++i;
    } else if (c == '?') {
      t.any = true;
      ++i;
    } else if (c == '[') {
      t.is_class = true;
      ++i;
      if (i < p.size() && p[i] == '^') {
        t.negated = true;
        ++i;
      }
      while (i < p.size() && p[i] != ']') {
        if (p[i] == '\\' && i + 1 < p.size()) {  // an escaped byte, ']' included
          t.items.push_back({p[i + 1], p[i + 1], true});
          i += 2;
        } else if (i + 2 < p.size() && p[i + 1] == '-') {
          // A range needs three bytes of pattern, whatever they are (so "[a-]" is
          // the range a..']', as in Redis).
          t.items.push_back({std::min(p[i], p[i + 2]), std::max(p[i], p[i + 2]), false});
          i += 3;
        } else {
          t.items.push_back({p[i], p[i], false});
          ++i;
        }
      }
      if (i < p.size()) ++i;  // ']'; an unterminated class ends with the pattern
    } else if (c == '\\' && i + 1 < p.size()) {
      t.literal = p[i + 1];
      i += 2;
    } else {
      t.literal = c;  // a trailing '\\' is itself
      ++i;
    }
    out.push_back(t);
  }
  return out;
}

inline bool GlobClassHas(const GlobToken& t, char c, bool nocase) {
  for (const GlobToken::Item& it : t.items) {
    if (it.exact) {
      if (c == it.lo) return true;
    } else if (nocase) {
      char x = GlobLower(c);
      if (x >= GlobLower(it.lo) && x <= GlobLower(it.hi)) return true;
    } else if (c >= it.lo && c <= it.hi) {
      return true;
    }
  }
  return false;
}

inline bool GlobReference(std::string_view pattern, std::string_view s, bool nocase) {
  std::vector<GlobToken> t = GlobTokens(pattern);
  const size_t n = t.size(), m = s.size();
  // ok[i][j]: tokens i.. match s[j..].
  std::vector<std::vector<char>> ok(n + 1, std::vector<char>(m + 1, 0));
  ok[n][m] = 1;
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m + 1; j-- > 0;) {
      const GlobToken& k = t[i];
      if (k.star) {
        ok[i][j] = ok[i + 1][j] || (j < m && ok[i][j + 1]);
        continue;
      }
      if (j == m) continue;
      bool hit;
      if (k.any) {
        hit = true;
      } else if (k.is_class) {
        hit = GlobClassHas(k, s[j], nocase) != k.negated;
      } else {
        hit = nocase ? GlobLower(k.literal) == GlobLower(s[j]) : k.literal == s[j];
      }
      ok[i][j] = hit && ok[i + 1][j + 1];
    }
  }
  return ok[0][0];
}

}  // namespace pion::testing
