#include "server/commands/testing/resp_value.h"

#include <charconv>

namespace pion::server::testing {

namespace {

bool Line(std::string_view* in, std::string_view* line) {
  size_t eol = in->find("\r\n");
  if (eol == std::string_view::npos) return false;
  *line = in->substr(0, eol);
  in->remove_prefix(eol + 2);
  return true;
}

bool Int(std::string_view s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool Parse(std::string_view* in, RespValue* out, int depth) {
  using T = RespValue::Type;
  if (in->empty() || depth > 64) return false;
  char type = (*in)[0];
  in->remove_prefix(1);
  std::string_view line;
  if (!Line(in, &line)) return false;
  int64_t n = 0;
  switch (type) {
    case '+':
    case '(':
      out->type = T::kSimple;
      out->str = line;
      return true;
    case '-':
      out->type = T::kError;
      out->str = line;
      return true;
    case ':':
      out->type = T::kInteger;
      return Int(line, &out->integer);
    case '_':
      out->type = T::kNull;
      return true;
    case ',':
      out->type = T::kDouble;
      out->str = line;
      return true;
    case '#':
      out->type = T::kBool;
      out->integer = line == "t";
      return line == "t" || line == "f";
    case '$':
    case '=': {
      if (!Int(line, &n)) return false;
      if (n < 0) {
        out->type = T::kNull;
        return true;
      }
      if (in->size() < static_cast<size_t>(n) + 2) return false;
      out->type = T::kBulk;
      out->str = in->substr(0, static_cast<size_t>(n));
      if (type == '=' && out->str.size() >= 4) out->str.erase(0, 4);  // "txt:"
      in->remove_prefix(static_cast<size_t>(n) + 2);
      return true;
    }
    case '*':
    case '~':
    case '%':
    case '>': {
      if (!Int(line, &n)) return false;
      if (n < 0) {
        out->type = T::kNull;
        return true;
      }
      out->type = type == '%' ? T::kMap : type == '~' ? T::kSet : T::kArray;
      size_t count = static_cast<size_t>(n) * (type == '%' ? 2 : 1);
      out->elems.resize(count);
      for (auto& e : out->elems)
        if (!Parse(in, &e, depth + 1)) return false;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

std::optional<RespValue> ParseResp(std::string_view* in) {
  std::string_view rest = *in;
  RespValue v;
  if (!Parse(&rest, &v, 0)) return std::nullopt;
  *in = rest;
  return v;
}

const RespValue* RespValue::Find(std::string_view key) const {
  if (type != Type::kMap && type != Type::kArray) return nullptr;
  for (size_t i = 0; i + 1 < elems.size(); i += 2)
    if (elems[i] == key) return &elems[i + 1];
  return nullptr;
}

std::vector<std::string> RespValue::Strings() const {
  std::vector<std::string> out;
  for (const auto& e : elems) out.push_back(e.str);
  return out;
}

std::string RespValue::Debug() const {
  using T = Type;
  switch (type) {
    case T::kSimple:
      return "+" + str;
    case T::kError:
      return "-" + str;
    case T::kInteger:
      return ":" + std::to_string(integer);
    case T::kBulk:
      return "\"" + str + "\"";
    case T::kNull:
      return "(nil)";
    case T::kDouble:
      return "," + str;
    case T::kBool:
      return integer ? "#t" : "#f";
    case T::kArray:
    case T::kMap:
    case T::kSet: {
      std::string s = type == T::kMap ? "{" : type == T::kSet ? "~[" : "[";
      for (size_t i = 0; i < elems.size(); ++i) {
        if (i > 0) s += (type == T::kMap && i % 2 == 1) ? ": " : ", ";
        s += elems[i].Debug();
      }
      return s + (type == T::kMap ? "}" : "]");
    }
  }
  return "?";
}

bool operator==(const RespValue& v, std::string_view s) {
  return (v.type == RespValue::Type::kSimple || v.type == RespValue::Type::kBulk) && v.str == s;
}

void PrintTo(const RespValue& v, std::ostream* os) { *os << v.Debug(); }

}  // namespace pion::server::testing
