// Small string helpers shared by the protocol, the config and the tools.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pion {

// Redis' strict integer rules (string2ll): optional '-', digits, no '+', no
// spaces, no leading zeros (except "0"), no "-0", no overflow.
std::optional<int64_t> ParseInt64Strict(std::string_view s);
std::optional<uint64_t> ParseUint64Strict(std::string_view s);
// Strict double ("1.5", "-2", "1e3"); rejects spaces, empty, nan.
std::optional<double> ParseDouble(std::string_view s);
// Byte sizes as in redis.conf: "100", "1kb" (1024), "1k" (1000), "5mb", "5m",
// "2gb", "2g" (case-insensitive).
std::optional<uint64_t> ParseBytes(std::string_view s);

// ASCII case folding only.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);

// Redis' sdscatrepr: appends `s` with \\ \n \r \t \a \b escapes and \xHH for
// every other byte outside printable ASCII; `quoted`: in double quotes, with \"
// escaped (MONITOR). Unquoted, the text holds no control byte, so it can stand
// in a "name:value" line of an INFO body.
void AppendRepr(std::string* out, std::string_view s, bool quoted = true);

// Glob-style match as Redis stringmatchlen (*, ?, [..], \\), case-insensitive when nocase.
// Never recursive: at most (pattern + 1) x (s + 1) token steps, whatever the pattern
// (KEYS, SCAN MATCH, ACL key patterns and CONFIG GET take patterns from clients).
// `steps`, when given, is increased by the steps taken (the tests bound it). As
// Redis, a pattern whose match goes through more than 1000 '*' groups followed by
// another token ("*?" repeated 1001 times) matches nothing.
bool GlobMatch(std::string_view pattern, std::string_view s, bool nocase,
               uint64_t* steps = nullptr);

}  // namespace pion
