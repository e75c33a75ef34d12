// V.* commands (product.md §6). Filled in by the server issue.
#include "server/command.h"

namespace pion::server {
void AddVStoreCommands(std::vector<CommandSpec>*) {}
}  // namespace pion::server
