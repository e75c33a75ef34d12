// KV.PREFIX.* (docs/protocol.md "KV.PREFIX"): the prefix registry over the V-store. Handlers
// validate every argument before anything changes, then make one store call.
// Receipts (PION.STATS) are recorded by LOOKUP; see receipt.h for the rules.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "persist/persistence.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "store/key_ops.h"
#include "store/prefix_ops.h"

namespace pion::server {

namespace {

// A BLOCKS reply at least this long is sent by reference to the stored table
// (as GET's values: commands/strings.cc); shorter ones are copied, which costs
// less than a pinned segment.
constexpr size_t kBlocksByRefBytes = 16 * 1024;

bool CheckNsLength(CommandContext& ctx, std::string_view ns) {
  return server::CheckNsLength(ReplyErrors(ctx), ns);
}

// Whether the caller may use every key `keys` names with `perm`; else replies
// NOPERM (and logs the key to ACL LOG as admission does). Dispatch checks the
// keys a command names; this is for the namespaces it reaches through links.
void DenyKey(CommandContext& ctx, const AclUser* u, std::string_view key) {
  ctx.env->acl().Log("key", key, u != nullptr ? u->name : "",
                     ctx.env->control().ClientLine(ctx.client),
                     ctx.in_exec ? kAclLogMulti : kAclLogTopLevel);
  ctx.reply->Error(kErrNoPermKey);
}

bool AllowedAll(CommandContext& ctx, std::span<const std::string_view> keys, uint8_t perm) {
  const AclUser* u = ctx.env->ClientUser(ctx.client);
  if (u != nullptr && (u->unrestricted || u->allkeys)) return true;
  for (std::string_view k : keys) {
    if (u != nullptr && u->KeyAllowed(k, perm)) continue;
    DenyKey(ctx, u, k);
    return false;
  }
  return true;
}

void KvRegister(CommandContext& ctx) {
  store::RegisterArgs ra;
  ra.ns = ctx.args[1];
  // The parent is a key the command reads (it links to it, and LOOKUP ...
  // CHAIN of the child names it): the caller must be allowed to read it.
  auto parent_ok = [&ctx](std::string_view parent) {
    const AclUser* u = ctx.env->ClientUser(ctx.client);
    if (u == nullptr || !u->KeyAllowed(AclKeyOwner(parent), kAclPermRead)) {
      ctx.reply->Error(kErrNoPermKey);
      return false;
    }
    return true;
  };
  if (!ParseRegister(ReplyErrors(ctx), ctx.args, parent_ok, &ra)) return;
  uint64_t lsn = 0;
  // Keyspace notifications: `new` for a namespace that did not exist.
  bool absent = ctx.env->NotifyWanted(kNotifyNew) &&
                store::OpType({*ctx.env->store()}, ra.ns) == store::KeyType::kNone;
  Status st = store::OpRegister({*ctx.env->store(), &lsn}, ra);
  ctx.wait_lsn = lsn;
  // The store's refusals (lineage ones included) carry a reason: errors.cc words them.
  if (!st.ok()) return ReplyStatus(ctx, st);
  if (absent) ctx.env->NotifyKeyspaceEvent(kNotifyNew, "new", ra.ns);
  ctx.env->NotifyKeyspaceEvent(kNotifyModule, "kvprefix.register", ra.ns);
  ctx.reply->SimpleString("OK");
}

// LOOKUP ... CHAIN: the chain root..leaf as an array of [ns, tokens] pairs, or
// +MISS. The receipt credits the whole chain once: the sum of its tokens (or
// TOKENS), and the sum of the segments' reported prefill times when every
// segment reported one (else none: the estimate), unless PREFILL_MS is given.
void KvLookupChain(CommandContext& ctx, bool has_tokens, int64_t tokens, bool has_prefill,
                   int64_t prefill_ms) {
  std::vector<store::ChainSegment> chain = store::OpLookupChain({*ctx.env->store()}, ctx.args[1]);
  if (chain.empty()) {
    ctx.env->receipt().RecordMiss();
    ctx.reply->SimpleString("MISS");
    return;
  }
  // The reply names every ancestor: the caller must be allowed to read each one
  // (docs/protocol.md). A partial chain would restore as if complete, so an
  // unreadable ancestor refuses the whole lookup (no receipt credit).
  std::vector<std::string_view> names;
  names.reserve(chain.size());
  for (const auto& seg : chain) names.push_back(seg.ns);
  if (!AllowedAll(ctx, names, kAclPermRead)) return;
  uint64_t total = 0, total_us = 0;
  bool all_measured = true;
  for (const auto& seg : chain) {
    total += seg.tokens;
    total_us += seg.prefill_us;
    all_measured = all_measured && seg.prefill_us > 0;
  }
  uint64_t credit_tokens = has_tokens ? static_cast<uint64_t>(tokens) : total;
  uint64_t credit_us = has_prefill                     ? static_cast<uint64_t>(prefill_ms) * 1000
                       : (all_measured && !has_tokens) ? total_us
                                                       : 0;
  ctx.env->receipt().RecordHit(credit_tokens, credit_us);
  ctx.reply->ArrayHeader(chain.size());
  for (const auto& seg : chain) {
    ctx.reply->ArrayHeader(2);
    ctx.reply->Bulk(seg.ns);
    ctx.reply->Integer(static_cast<int64_t>(seg.tokens));
  }
}

void KvLookup(CommandContext& ctx) {
  LookupArgs la;
  if (!ParseLookup(ReplyErrors(ctx), ctx.args, /*allow_chain=*/true, &la)) return;
  if (la.chain) return KvLookupChain(ctx, la.has_tokens, la.tokens, la.has_prefill, la.prefill_ms);
  store::LookupResult lr = store::OpLookup({*ctx.env->store()}, ctx.args[1]);
  if (!lr.hit) {
    ctx.env->receipt().RecordMiss();
    ctx.reply->SimpleString("MISS");
    return;
  }
  uint64_t credit_tokens = 0, credit_us = 0;
  LookupCredit(lr, la, &credit_tokens, &credit_us);
  ctx.env->receipt().RecordHit(credit_tokens, credit_us);
  ctx.reply->SimpleString("HIT");
}

void KvDrop(CommandContext& ctx) {
  std::vector<std::string_view> names(ctx.args.begin() + 1, ctx.args.end());
  // A parent's descendants go with it: each needs the write permission the
  // named keys needed at admission, or nothing is dropped (docs/protocol.md).
  const AclUser* u = ctx.env->ClientUser(ctx.client);
  std::string denied;
  std::function<bool(std::string_view)> may_drop = SubtreeWriteCheck(u, &denied);
  uint64_t lsn = 0;
  auto n = store::OpDrop({*ctx.env->store(), &lsn}, names, may_drop);
  ctx.wait_lsn = lsn;
  if (!n.ok() && n.status().reason<store::Reason>() == store::Reason::kDropRefused) {
    DenyKey(ctx, u, denied);
    return;
  }
  if (!n.ok()) return ReplyStatus(ctx, n.status());
  ctx.reply->Integer(static_cast<int64_t>(*n));
}

void KvBlocks(CommandContext& ctx) {
  if (!CheckNsLength(ctx, ctx.args[1])) return;
  auto table = store::OpBlocks({*ctx.env->store()}, ctx.args[1]);
  if (!table) {
    ctx.reply->SimpleString("UNKNOWN");
    return;
  }
  const size_t n = table->hashes.size();
  const size_t len = 8 + 8 * n;
  if (len < kBlocksByRefBytes) {
    uint8_t* out = ctx.reply->BulkReserve(len);
    std::memcpy(out, table->reply_head().data(), 8);
    std::memcpy(out + 8, table->hashes.data(), 8 * n);
    return;
  }
  // By reference (no allocation per request): the table is immutable once finished, and the
  // pin keeps it alive until the last byte is written, even if the namespace is
  // dropped or re-registered meanwhile; it counts once against the client's
  // output limits however many replies pin it.
  iovec parts[2] = {{const_cast<uint8_t*>(table->reply_head().data()), 8},
                    {const_cast<uint64_t*>(table->hashes.data()), 8 * n}};
  net::PinnedBlock block{table.get(), table->MemoryBytes()};
  ctx.reply->BulkPinned(len, parts, table, {&block, 1});
}

void KvMembership(CommandContext& ctx) {
  auto a = ctx.args;
  if (!CheckNsLength(ctx, a[1])) return;
  // The probes are read straight from the argument (no copy, no allocation).
  int64_t count;
  if (!ArgInRange(ctx, a[2], 0, static_cast<int64_t>(store::kMaxHashCount), kErrHashCountRange,
                  &count))
    return;
  std::string_view blob = a[3];
  if (blob.size() != static_cast<size_t>(count) * 8) return ctx.reply->Error(kErrHashBlobLength);
  // Probed in place under the shard lock (no reference to the table taken).
  // Two pointers captured: std::function keeps them inline (no allocation).
  bool known =
      store::OpWithBlocks({*ctx.env->store()}, a[1], [&ctx, &blob](const store::BlockTable& table) {
        const size_t n = blob.size() / 8;
        size_t bytes = (n + 7) / 8;
        uint8_t* out = ctx.reply->BulkReserve(bytes);
        std::memset(out, 0, bytes);
        table.ContainsEach(reinterpret_cast<const uint8_t*>(blob.data()), n, out);
      });
  if (!known) ctx.reply->SimpleString("UNKNOWN");
}

// KV.PREFIX.INFO <ns>: one namespace's place in its chain (no LRU touch).
void KvInfoOf(CommandContext& ctx) {
  std::string_view ns = ctx.args[1];
  if (!CheckNsLength(ctx, ns)) return;
  store::NamespaceInfo info;
  if (!store::OpDescribe({*ctx.env->store()}, ns, &info)) {
    ctx.reply->SimpleString("UNKNOWN");
    return;
  }
  ctx.reply->Bulk(NamespaceInfoBody(ns, info));
}

void KvInfo(CommandContext& ctx) {
  if (ctx.args.size() > 2) return ctx.reply->Error(kErrSyntaxError);
  if (ctx.args.size() == 2) return KvInfoOf(ctx);
  store::StoreStats s = ctx.env->store()->Stats();
  std::string out;
  auto line = [&](std::string_view k, uint64_t v) { InfoField(&out, k, v); };
  line("registered_prefixes", s.registered_prefixes);
  line("total_prefix_tokens", s.total_prefix_tokens);
  line("vstore_sessions", s.sessions);
  line("vstore_max_sessions", s.max_sessions);
  line("vstore_total_fetches", s.total_fetches);
  line("vstore_evictions", s.evictions);
  line("vstore_bytes", s.bytes);
  line("maxmemory", s.max_bytes);
  line("linked_prefixes", s.linked_prefixes);
  // Persistence counters (docs/wal_format.md).
  persist::PersistStats ps;
  if (persist::Persistence* p = ctx.env->persistence()) ps = p->Stats();
  line("wal_enabled", ps.wal_enabled ? 1 : 0);
  line("wal_bytes", ps.wal_bytes);
  line("wal_appended", ps.wal_appended);
  line("wal_replayed", ps.wal_replayed);
  line("last_save_unix", static_cast<uint64_t>(ps.last_save_unix));
  // Stage 2: the warm/cold attention slots (commands/attend.cc).
  AppendAttendInfo(*ctx.env, &out);
  ctx.reply->Bulk(out);
}

// A failed SAVE / COMMIT: NotSupported is persistence's "no WAL" (--appendonly
// no), the same failure as no persistence at all, so it gets the same line.
void ReplyPersistError(DeferredReply& done, Status st) {
  if (st.code() == Code::kNotSupported)
    return done.Complete([](ReplyBuilder& r) { r.Error(kErrNoPersistence); });
  done.Error(StatusToError(st));
}

void KvSave(CommandContext& ctx) {
  // Snapshot to pion.vstore (or a relative path in --dir); see src/persist/persistence.h.
  // Runs on a background thread and the reply is completed from there: this
  // worker keeps serving its other clients, this client's later commands wait
  // for the reply, and store mutations pause only for the capture barrier
  // (docs/ARCHITECTURE.md "Recovery"). One SAVE at a time: another meanwhile
  // is refused, as Redis refuses a second BGSAVE.
  persist::Persistence* p = ctx.env->persistence();
  if (p == nullptr) return ctx.reply->Error(kErrNoPersistence);
  if (ctx.args.size() > 2) return ctx.reply->Error(kErrSyntaxError);
  std::string path = ctx.args.size() == 2 ? std::string(ctx.args[1]) : std::string();
  if (!path.empty()) {
    Status st = persist::Persistence::ValidateSavePath(path);
    if (!st.ok()) return ctx.reply->Error(StatusToError(st));
  }
  CommandEnv* env = ctx.env;
  if (!env->saves().TryBeginSave()) return ctx.reply->Error(kErrSaveInProgress);
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  bool queued = env->background().Post([env, p, path = std::move(path), done] {
    Status st = p->Save(path);
    env->saves().EndSave();  // before the reply: the client's next SAVE is accepted
    if (st.ok())
      done->SimpleString("OK");
    else
      ReplyPersistError(*done, std::move(st));
  });
  if (!queued) {
    env->saves().EndSave();
    done->Complete([](ReplyBuilder& r) { r.Error(kErrShuttingDown); });
  }
}

void KvCommit(CommandContext& ctx) {
  // Barrier: every write acknowledged before it is on stable storage.
  persist::Persistence* p = ctx.env->persistence();
  if (p == nullptr) return ctx.reply->Error(kErrNoPersistence);
  if (p->Stats().wal_broken)
    return ctx.reply->Error(
        StatusToError(Status::IOError("KV.PREFIX.COMMIT: the log could not be flushed")));
  if (p->AckWaitsForSync()) {
    // Held like any write under appendfsync always until the sync covers it.
    ctx.wait_lsn = p->RequestSync();
    ctx.reply->SimpleString("OK");
    return;
  }
  // everysec / no: the durable-LSN hold does not cover this (acks run ahead of
  // the fsync), so the fsync runs in the background and completes the reply.
  std::shared_ptr<DeferredReply> done = ctx.Defer();
  bool queued = ctx.env->background().Post([p, done] {
    Status st = p->Commit();
    if (st.ok())
      done->SimpleString("OK");
    else
      ReplyPersistError(*done, std::move(st));
  });
  if (!queued) done->Complete([](ReplyBuilder& r) { r.Error(kErrShuttingDown); });
}

}  // namespace

void AddKvPrefixCommands(std::vector<CommandSpec>* out) {
  const PionHandler handlers[] = {
      {"KV.PREFIX.REGISTER", KvRegister},
      {"KV.PREFIX.LOOKUP", KvLookup},
      {"KV.PREFIX.DROP", KvDrop},
      {"KV.PREFIX.BLOCKS", KvBlocks},
      {"KV.PREFIX.MEMBERSHIP", KvMembership},
      {"KV.PREFIX.INFO", KvInfo},
      {"KV.PREFIX.SAVE", KvSave},
      {"KV.PREFIX.COMMIT", KvCommit},
  };
  AddPionCommands(handlers, out);
}

}  // namespace pion::server
