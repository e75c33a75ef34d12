// Keyspace notifications as the key and string commands send them
// (server/notify.h; Redis 7.0's events for the same commands). An event that
// needs a look before the write (`new`, `keymiss`) takes it only when someone
// could hear it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "server/command_env.h"
#include "server/commands/command.h"
#include "store/key_ops.h"
#include "store/store.h"

namespace pion::server {

inline void Notify(CommandContext& ctx, uint32_t type, std::string_view event,
                   std::string_view key) {
  ctx.env->NotifyKeyspaceEvent(type, event, key);
}

// Whether `key` is absent, when a `new` event could be heard (else false).
inline bool KeyAbsent(CommandContext& ctx, std::string_view key) {
  return ctx.env->NotifyWanted(kNotifyNew) &&
         store::OpType({*ctx.env->store()}, key) == store::KeyType::kNone;
}

// `keymiss` for each of `keys` that is absent (read commands).
inline void NotifyMisses(CommandContext& ctx, std::span<const std::string_view> keys) {
  if (!ctx.env->NotifyWanted(kNotifyKeyMiss)) return;
  for (std::string_view k : keys)
    if (store::OpType({*ctx.env->store()}, k) == store::KeyType::kNone)
      Notify(ctx, kNotifyKeyMiss, "keymiss", k);
}

}  // namespace pion::server
