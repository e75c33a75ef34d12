#include "server/commands/command_docs.h"

#include <cctype>

#include "base/strutil.h"

namespace pion::server {

namespace {

bool IsIntegerName(std::string_view n) {
  static const char* kInts[] = {"seconds",
                                "milliseconds",
                                "unix-time-seconds",
                                "unix-time-milliseconds",
                                "count",
                                "cursor",
                                "start",
                                "end",
                                "index",
                                "protover",
                                "client-id",
                                "maxage",
                                "kv_dim",
                                "layer",
                                "n",
                                "ms",
                                "hash_count",
                                "block_size",
                                "num_layers",
                                "id",
                                "sid"};
  for (const char* k : kInts)
    if (n == k) return true;
  return false;
}

// Tokens: words, "[", "]", "(", ")", "|", "...".
std::vector<std::string> Tokenize(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ') {
      ++i;
    } else if (c == '[' || c == ']' || c == '(' || c == ')' || c == '|') {
      out.emplace_back(1, c);
      ++i;
    } else if (s.substr(i, 3) == "...") {
      out.emplace_back("...");
      i += 3;
    } else {
      size_t j = i;
      while (j < s.size() && s[j] != ' ' && s[j] != '[' && s[j] != ']' && s[j] != '(' &&
             s[j] != ')' && s[j] != '|' && s.substr(j, 3) != "...")
        ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<std::string> toks) : t_(std::move(toks)) {}

  // Alternatives separated by '|' until `close` (or the end); each
  // alternative is a sequence. One alternative: that sequence.
  std::vector<DocArg> Items(const char* close) {
    std::vector<std::vector<DocArg>> alts(1);
    while (p_ < t_.size() && t_[p_] != close) {
      const std::string& tok = t_[p_];
      if (tok == "|") {
        ++p_;
        alts.emplace_back();
        continue;
      }
      if (tok == "...") {  // stray: marks the previous item
        ++p_;
        if (!alts.back().empty()) alts.back().back().multiple = true;
        continue;
      }
      if (tok == "]" || tok == ")") {  // unbalanced: stop
        ++p_;
        continue;
      }
      DocArg a = Atom();
      if (p_ < t_.size() && t_[p_] == "...") {
        a.multiple = true;
        ++p_;
      }
      alts.back().push_back(std::move(a));
    }
    if (p_ < t_.size()) ++p_;  // the closing bracket
    if (alts.size() == 1) return std::move(alts[0]);
    DocArg one;
    one.type = "oneof";
    for (auto& alt : alts) {
      if (alt.size() == 1) {
        one.args.push_back(std::move(alt[0]));
      } else {
        DocArg b;
        b.type = "block";
        b.args = std::move(alt);
        b.name = b.args.empty() ? "block" : Lower(b.args[0].name);
        one.args.push_back(std::move(b));
      }
    }
    one.name = NameOf(one);
    return {std::move(one)};
  }

 private:
  static std::string Lower(std::string s) { return ToLower(s); }
  static std::string NameOf(const DocArg& a) {
    std::string n;
    for (const DocArg& c : a.args) {
      if (!n.empty()) n += '-';
      n += Lower(c.name);
      if (n.size() > 40) break;
    }
    return n.empty() ? "arg" : n;
  }

  DocArg Group(const char* close, bool optional) {
    std::vector<DocArg> inner = Items(close);
    DocArg a;
    if (inner.size() == 1) {
      a = std::move(inner[0]);
    } else {
      a.type = "block";
      a.args = std::move(inner);
      a.name = NameOf(a);
    }
    if (optional) a.optional = true;
    return a;
  }

  DocArg Atom() {
    std::string tok = t_[p_++];
    if (tok == "[") return Group("]", true);
    if (tok == "(") return Group(")", false);
    DocArg a;
    bool upper = false, lower = false;
    for (char c : tok) {
      if (c >= 'A' && c <= 'Z') upper = true;
      if (c >= 'a' && c <= 'z') lower = true;
    }
    if (upper && !lower) {
      a.type = "pure-token";
      a.token = tok;
      a.name = Lower(tok);
    } else {
      a.name = tok;
      std::string_view n = tok;
      if (n == "key" || n.ends_with("key"))
        a.type = "key";
      else if (IsIntegerName(n))
        a.type = "integer";
      else
        a.type = "string";
    }
    return a;
  }

  std::vector<std::string> t_;
  size_t p_ = 0;
};

}  // namespace

std::vector<DocArg> ParseDocSyntax(std::string_view syntax) {
  Parser p(Tokenize(syntax));
  return p.Items("");
}

}  // namespace pion::server
