// The module's commands (commands.cc): registration in OnLoad.
#pragma once

#include "module/redis_api.h"

namespace pion::module {

bool RegisterCommands(RedisModuleCtx* ctx);

}  // namespace pion::module
