// COMMAND DOCS data: per command (and per subcommand, "CLIENT|LIST") its
// group, the version it appeared in and its argument grammar, from which the
// argument tree COMMAND DOCS replies with is built (redis-cli draws its
// argument hints and HELP text from that tree).
//
// Grammar of `syntax` (Redis' documentation style):
//   UPPER          a keyword (pure-token)
//   lower          a value; "key" (or a name ending in "key") is a key, names
//                  like "seconds" or "count" are integers, the rest strings
//   x...           x may repeat
//   [ ... ]        optional
//   a | b          one of (inside [ ] or ( ))
//   ( ... )        a group
// e.g. "key value [NX | XX] [GET] [EX seconds | PX milliseconds | KEEPTTL]".
//
// The table may name commands the server does not have (the string keyspace,
// say): only commands in the CommandTable are ever reported.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pion::server {

struct CommandDoc {
  const char* name;     // "SET", or "CLIENT|LIST" for a subcommand
  const char* group;    // "string", "connection", "server", "pion", ...
  const char* since;    // first version
  const char* syntax;   // the arguments after the name (after the subcommand)
  const char* summary;  // nullptr: the CommandSpec's
};

// Every entry, in table order.
std::span<const CommandDoc> CommandDocs();
// The entry for `name` (upper case, "CLIENT|LIST" for a subcommand), or nullptr.
const CommandDoc* FindCommandDoc(std::string_view name);

// One node of the argument tree.
struct DocArg {
  std::string name;
  std::string type;   // key, string, integer, pure-token, block, oneof
  std::string token;  // pure-token: the keyword
  bool optional = false;
  bool multiple = false;
  std::vector<DocArg> args;  // block, oneof
};

// Parses a syntax string (see above). Malformed input yields what parsed so far.
std::vector<DocArg> ParseDocSyntax(std::string_view syntax);

}  // namespace pion::server
