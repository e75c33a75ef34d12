// pion-server's command line and config file: both go through the option
// table (config.cc) one setting at a time, and --help is made from it.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "net/resp_parser.h"
#include "server/config.h"

namespace pion::server {

namespace {

using Values = std::vector<std::string>;

// A config file line's tokens: whitespace separated, with "double" or
// 'single' quotes for values holding spaces (redis.conf rules).
bool SplitFileLine(const std::string& line, Values* out) {
  std::string arena;
  std::vector<std::string_view> views;
  if (!net::SplitInlineArgs(line, &arena, &views)) return false;
  for (auto v : views) out->emplace_back(v);
  return true;
}

// The words a flag accepts after it (the Bool codec's words).
bool IsYesNo(std::string_view v) {
  return EqualsIgnoreCase(v, "yes") || EqualsIgnoreCase(v, "true") || v == "1" ||
         EqualsIgnoreCase(v, "no") || EqualsIgnoreCase(v, "false") || v == "0";
}

// Whether `arg` is one of the '|'-separated words of `list`.
bool IsListKeyword(std::string_view list, std::string_view arg) {
  while (!list.empty()) {
    size_t bar = list.find('|');
    if (EqualsIgnoreCase(list.substr(0, bar), arg)) return true;
    if (bar == std::string_view::npos) break;
    list.remove_prefix(bar + 1);
  }
  return false;
}

Status LoadFile(Config* cfg, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot open config file '" + path + "'");
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    Values toks;
    if (!SplitFileLine(line, &toks))
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": unbalanced quotes");
    if (toks.empty()) continue;
    std::string name = ToLower(toks[0]);
    Values values(toks.begin() + 1, toks.end());
    Status st = ApplySetting(cfg, name, values);
    if (!st.ok())
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": " +
                                     std::string(st.message()));
  }
  return Status::OK();
}

// Appends `words` to `out` wrapped at `width` columns, continuation lines
// indented by `indent` spaces.
void AppendWrapped(std::string* out, size_t col, const std::string& words, size_t indent,
                   size_t width) {
  std::istringstream in(words);
  std::string w;
  bool first = true;
  while (in >> w) {
    if (!first && col + 1 + w.size() > width) {
      out->append("\n").append(indent, ' ');
      col = indent;
    } else if (!first) {
      out->push_back(' ');
      ++col;
    }
    out->append(w);
    col += w.size();
    first = false;
  }
  out->push_back('\n');
}

}  // namespace

std::string ConfigUsage() {
  constexpr size_t kHelpColumn = 33, kWidth = 100;
  std::string out = "Usage: pion-server [/path/to/pion.conf] [--option value ...]\n\n";
  for (const ConfigOption& o : ConfigOptions()) {
    std::string line = "  ";
    if (o.short_flag != 0) line.append("-").append(1, o.short_flag).append(", ");
    line.append("--").append(o.name);
    if (*o.arg != '\0') line.append(" ").append(o.arg);
    line.append(line.size() + 2 <= kHelpColumn ? kHelpColumn - line.size() : 2, ' ');
    std::string help = o.help;
    const char* shown = o.shown_default != nullptr ? o.shown_default : o.default_value;
    if (!o.is_flag() && *shown != '\0') help.append(" (default ").append(shown).append(")");
    out.append(line);
    AppendWrapped(&out, line.size(), help, kHelpColumn, kWidth);
  }
  out.append(
      "  --user 'NAME RULES...'         an ACL user (repeatable; config file: user NAME RULES...)\n"
      "  --help, --version\n"
      "\n"
      "A config file holds the same names without dashes, one 'name value' per line.\n");
  return out;
}

Result<Config> ParseConfig(int argc, char** argv) {
  Config cfg;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') {
    cfg.config_file = argv[1];
    PION_RETURN_IF_ERROR(LoadFile(&cfg, cfg.config_file));
    i = 2;
  }
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      cfg.show_help = true;
      continue;
    }
    if (a == "-v" || a == "--version") {
      cfg.show_version = true;
      continue;
    }
    const ConfigOption* opt = nullptr;
    Values values;
    if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
      for (const ConfigOption& o : ConfigOptions())
        if (o.short_flag == a[1]) opt = &o;
    } else if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        values.push_back(name.substr(eq + 1));
        name.resize(eq);
      }
      opt = FindConfigOption(name);
      if (opt == nullptr && name == "user") {
        if (values.empty()) {
          if (i + 1 >= argc) return Status::InvalidArgument("option '" + a + "' needs a value");
          values.push_back(argv[++i]);
        }
        PION_RETURN_IF_ERROR(ApplySetting(&cfg, name, values));
        continue;
      }
    } else {
      return Status::InvalidArgument("unexpected argument '" + a +
                                     "' (options start with --; the config file comes first)");
    }
    if (opt == nullptr) return Status::InvalidArgument("unknown option '" + a + "' (see --help)");
    if (values.empty()) {
      const char* list = opt->codec.list_keyword;
      if (opt->is_flag()) {
        // A flag takes an explicit yes/no only if one follows.
        if (i + 1 < argc && IsYesNo(argv[i + 1])) values.push_back(argv[++i]);
      } else if (list != nullptr && i + 4 < argc && IsListKeyword(list, argv[i + 1])) {
        // "<class> a b c" and as many more groups of four as follow.
        do {
          for (int k = 0; k < 4; ++k) values.push_back(argv[++i]);
        } while (i + 4 < argc && IsListKeyword(list, argv[i + 1]));
      } else {
        if (i + 1 >= argc) return Status::InvalidArgument("option '" + a + "' needs a value");
        values.push_back(argv[++i]);
      }
    }
    PION_RETURN_IF_ERROR(opt->codec.set(&cfg, opt->name, values));
  }
  return cfg;
}

}  // namespace pion::server
