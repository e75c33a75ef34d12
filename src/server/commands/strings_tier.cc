// See strings_tier.h.
#include "server/commands/strings_tier.h"

#include <sys/uio.h>

#include <memory>
#include <string>
#include <utility>

#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/block_format.h"
#include "server/kv_events.h"
#include "store/store.h"

namespace pion::server {

void ReplyFromTier(CommandContext& ctx, store::StrRef v) {
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  CommandEnv* env = ctx.env;
  std::string key(ctx.args[1]);
  env->store()->ReadTiered(key, v, [env, done, key, v](Result<store::StrRef> r) {
    if (!r.ok()) {
      done->Complete([env, key, v, st = r.status()](ReplyBuilder& rb) {
        if (st.code() != Code::kCorruption) return rb.Error(StatusToError(st));  // kept
        env->store()->DropDamagedTiered(key, v);  // damaged: never a wrong byte
        KvEvents::FlushThread();                  // completed outside the read batch
        rb.Null();
      });
      return;
    }
    done->Complete([env, key, v, fresh = *r](ReplyBuilder& rb) {
      env->store()->PromoteTiered(key, v, fresh);
      if (fresh->quantized()) return ReplyStrValue(rb, fresh);
      iovec part{fresh->data, fresh->size};
      rb.BulkExternal(fresh->size, std::span<const iovec>(&part, 1), fresh);
    });
  });
}

void ReplyAfterTierRead(CommandContext& ctx, store::StrRef v, TierValueReply write) {
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  CommandEnv* env = ctx.env;
  std::string key(ctx.args[1]);
  env->store()->ReadTiered(key, v, [env, done, key, v, write](Result<store::StrRef> r) {
    if (!r.ok()) {
      done->Complete([env, key, v, write, st = r.status()](ReplyBuilder& rb) {
        if (st.code() != Code::kCorruption) return rb.Error(StatusToError(st));  // kept
        env->store()->DropDamagedTiered(key, v);  // damaged (if the key still holds it)
        KvEvents::FlushThread();
        write(rb, nullptr);
      });
      return;
    }
    done->Complete([write, fresh = *r](ReplyBuilder& rb) { write(rb, fresh); });
  });
}

}  // namespace pion::server
