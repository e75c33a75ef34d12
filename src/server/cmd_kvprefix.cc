// KV.PREFIX.* commands (product.md §5). Filled in by the server issue.
#include "server/command.h"

namespace pion::server {
void AddKvPrefixCommands(std::vector<CommandSpec>*) {}
}  // namespace pion::server
