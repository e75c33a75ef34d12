// COMMAND DOCS' argument grammar: the syntax string a command's row
// (CommandSpec::syntax, SubcommandDoc::syntax, kvproto/pion_commands.h's
// PionCommandRow::syntax) writes its arguments in, parsed into the argument
// tree COMMAND DOCS replies with (redis-cli draws its argument hints and HELP
// text from that tree). The group, version and summary are in the row too.
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
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pion::server {

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
