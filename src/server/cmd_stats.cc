// PION.STATS (product.md §8). Filled in by the server issue.
#include "server/command.h"

namespace pion::server {
void AddStatsCommands(std::vector<CommandSpec>*) {}
}  // namespace pion::server
