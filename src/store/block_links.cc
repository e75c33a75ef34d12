// The keyspace's block links: string keys linked as chains (docs/protocol.md
// "Blocks", store.h "Blocks"), as KV.BLOCK.CHAIN (store/block_chain.cc) writes
// them and recovery replays them.
//
// The rules are the namespaces' lineage rules (store.h "Lineage",
// eviction.cc), applied to string keys: a block with a live child is not an
// eviction candidate (EvictionExempt: leaves go first, and a parent becomes a
// candidate once its last child is gone); a touch gives the block's ancestors
// the same stamp (StampAncestorsLocked, the counterpart of Store::Touch), so a
// chain ages as one unit and the least recently used chain goes leaf to root.
// Unlike a namespace, a block's links may change: removing a block (DEL,
// expiry, eviction, an overwrite by RENAME) makes its children roots, and a
// link that would close a cycle is not made (the key becomes a root).
//
// Links live in StrEntry::block (BlockLinks), guarded by ks_.mu; the `parent`
// pointer is also written under the entry's shard lock, because the read paths
// (GET, MGET, MATCH) test it under that lock alone to choose the path under
// ks_.mu that stamps ancestors.
#include <algorithm>
#include <mutex>

#include "base/check.h"
#include "base/clock.h"
#include "base/log.h"
#include "store/store.h"

namespace pion::store {

void Store::UnlinkParentLocked(StrEntry& child) {
  if (!child.block || child.block->parent == nullptr) return;
  StrEntry* p = child.block->parent;
  auto& kids = p->block->children;
  auto it = std::find(kids.begin(), kids.end(), &child);
  if (it != kids.end()) {
    *it = kids.back();
    kids.pop_back();
  }
  Shard& sh = ks_.ShardFor(*child.key);
  base::MutexLock sl(&sh.mu);
  child.block->parent = nullptr;
}

void Store::LinkBlockLocked(StrEntry& child, StrEntry* parent) {
  if (!child.block) {
    Shard& sh = ks_.ShardFor(*child.key);
    base::MutexLock sl(&sh.mu);
    child.block = std::make_unique<BlockLinks>();
  }
  if (child.block->parent == parent) return;
  UnlinkParentLocked(child);
  // A parent that is the child itself or one of its descendants would close a
  // cycle: the child stays a root.
  for (const StrEntry* p = parent; p != nullptr; p = p->block ? p->block->parent : nullptr)
    if (p == &child) return;
  if (parent == nullptr) return;
  {
    Shard& psh = ks_.ShardFor(*parent->key);
    base::MutexLock sl(&psh.mu);
    if (!parent->block) parent->block = std::make_unique<BlockLinks>();
  }
  parent->block->children.push_back(&child);
  Shard& sh = ks_.ShardFor(*child.key);
  base::MutexLock sl(&sh.mu);
  child.block->parent = parent;
}

void Store::StampAncestorsLocked(const StrEntry& e, uint64_t stamp) {
  // Stamps only grow along a chain (every touch stamps up to the root), so an
  // ancestor already at `stamp` or later has its own ancestors there too.
  for (StrEntry* p = e.block ? e.block->parent : nullptr; p != nullptr;
       p = p->block ? p->block->parent : nullptr) {
    Shard& sh = ks_.ShardFor(*p->key);
    base::MutexLock sl(&sh.mu);
    if (p->stamp >= stamp) break;
    p->stamp = stamp;
    sh.MoveToTail(*p);
  }
}

std::unique_ptr<BlockLinks> Store::TakeLinksLocked(StrEntry& e) {
  Shard& sh = ks_.ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  return std::move(e.block);
}

void Store::GiveLinksLocked(StrEntry& to, std::unique_ptr<BlockLinks> links, const StrEntry* from) {
  if (!links) return;
  // `from` is gone (only its address is compared): its parent and children
  // now name `to`.
  for (StrEntry* c : links->children) {
    Shard& csh = ks_.ShardFor(*c->key);
    base::MutexLock sl(&csh.mu);
    c->block->parent = &to;
  }
  if (StrEntry* p = links->parent) {
    for (StrEntry*& k : p->block->children)
      if (k == from) k = &to;
  }
  Shard& sh = ks_.ShardFor(*to.key);
  base::MutexLock sl(&sh.mu);
  to.block = std::move(links);
}

void Store::ApplyChainLocked(std::span<const std::string_view> keys, std::span<const StrRef> values,
                             StrEntry* after, int64_t expire_at_ms,
                             std::span<const uint64_t> hashes, uint32_t tokens) {
  // KV events: the hash of the key this chain continues, as it stood.
  std::optional<uint64_t> parent_hash;
  if (after != nullptr && after->block && after->block->has_hash) parent_hash = after->block->hash;
  StrEntry* prev = after;
  for (size_t i = 0; i < keys.size(); ++i) {
    // A CHAIN over a hashed key replaces its hash: the old one is removed.
    if (StrEntry* old = ks_.FindStringLocked(keys[i])) DropBlockHashLocked(*old);
    StrEntry& e = StrPutLocked(keys[i], values[i], expire_at_ms);
    LinkBlockLocked(e, prev);
    e.block->has_hash = !hashes.empty();
    e.block->hash = hashes.empty() ? 0 : hashes[i];
    e.block->tokens = tokens;
    prev = &e;
  }
  // One stamp for the chain written and the ancestors it continues.
  const uint64_t s = ks_.NextStamp();
  for (std::string_view k : keys) {
    StrEntry* e = ks_.FindStringLocked(k);
    Shard& sh = ks_.ShardFor(k);
    base::MutexLock sl(&sh.mu);
    e->stamp = s;
    sh.MoveToTail(*e);
  }
  if (prev != nullptr) StampAncestorsLocked(*prev, s);
  if (block_observer_ != nullptr && !hashes.empty())
    block_observer_->OnBlockKeysStored(hashes, parent_hash, tokens);
}

void Store::DropBlockHashLocked(StrEntry& e) {
  if (!e.block || !e.block->has_hash) return;
  if (block_observer_ != nullptr) block_observer_->OnBlockKeyRemoved(e.block->hash);
  e.block->has_hash = false;
  e.block->hash = 0;
}

std::vector<ResidentBlockRun> Store::ResidentBlockKeys() const {
  base::MutexLock l(&ks_.mu);
  auto hashed = [](const StrEntry* e) { return e->block && e->block->has_hash; };
  std::vector<ResidentBlockRun> out;
  // Each run starts at a hashed key whose parent has no hash (or that has no
  // parent), or at a child of a key with several children; it follows single
  // hashed children. Links never form a cycle, so every hashed key is in
  // exactly one run.
  std::vector<std::pair<const StrEntry*, std::optional<uint64_t>>> todo;
  for (const Shard& sh : ks_.shards())
    for (const auto& [key, e] : ks_.StringsOf(sh))
      if (hashed(&e) && (e.block->parent == nullptr || !hashed(e.block->parent)))
        todo.push_back({&e, std::nullopt});
  std::vector<std::pair<const StrEntry*, std::optional<uint64_t>>> next;
  while (!todo.empty()) {
    next.clear();
    for (auto [e, parent] : todo) {
      ResidentBlockRun run;
      run.parent_hash = parent;
      run.tokens = e->block->tokens;
      run.hashes.push_back(e->block->hash);
      while (e->block->children.size() == 1 && hashed(e->block->children[0])) {
        e = e->block->children[0];
        run.hashes.push_back(e->block->hash);
      }
      for (const StrEntry* c : e->block->children)
        if (hashed(c)) next.push_back({c, e->block->hash});
      out.push_back(std::move(run));
    }
    todo.swap(next);
  }
  return out;
}

void Store::ApplyStrChain(const persist::StrChainRecord& r) {
  base::MutexLock l(&ks_.mu);
  const size_t n = r.entries.size();
  std::vector<std::string_view> keys(n);
  std::vector<StrRef> values(n);
  std::vector<uint64_t> hashes(r.has_hashes ? n : 0);
  const bool gone = r.expire_at_ms != 0 && r.expire_at_ms <= UnixMillis();
  uint64_t need = 0, have = 0;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = r.entries[i].key;
    if (gone) {
      if (StrEntry* e = ks_.FindStringLocked(keys[i])) StrEraseLocked(*e);
      continue;
    }
    const auto& v = r.entries[i].value;
    auto copy = StrValue::Copy(std::string_view(reinterpret_cast<const char*>(v.data()), v.size()));
    PION_CHECK(copy != nullptr);
    if (r.quant.row != 0) copy->quant = QuantTagOf(r.quant);  // checked by the decoder
    values[i] = std::move(copy);
    if (r.has_hashes) hashes[i] = r.entries[i].hash;
    need += StrCharge(keys[i], values[i]);
    if (const StrEntry* e = ks_.FindStringLocked(keys[i])) have += StrCharge(keys[i], e->value);
  }
  if (gone) return;
  StrEntry* after = r.has_after ? ks_.FindStringLocked(r.after) : nullptr;
  if (cfg_.max_bytes > 0) {
    uint64_t unused = 0;
    (void)EvictLocked(
        nullptr,
        [&]() REQUIRES(ks_.mu) { return bytes_ - std::min(have, bytes_) + need <= cfg_.max_bytes; },
        &unused);
    if (r.has_after) after = ks_.FindStringLocked(r.after);  // may have been evicted
  }
  ApplyChainLocked(keys, values, after, r.expire_at_ms, hashes, r.tokens);
}

void Store::ApplyStrBlock(const persist::StrBlockRecord& r) {
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(r.key);
  if (e == nullptr) return;  // expired or evicted while loading
  StrEntry* parent = r.has_parent ? ks_.FindStringLocked(r.parent) : nullptr;
  LinkBlockLocked(*e, parent);
  e->block->has_hash = r.has_hash;
  e->block->hash = r.hash;
  e->block->tokens = r.tokens;
}

void Store::ApplyStrQuant(const persist::StrQuantRecord& r) {
  base::MutexLock l(&ks_.mu);
  StrEntry* e = ks_.FindStringLocked(r.key);
  if (e == nullptr) return;  // expired or evicted while loading
  if (r.quant.dtype > 2 || !quant::DimSupported(r.quant.format, r.quant.row) ||
      e->value->size % quant::RowBytes(r.quant.format, r.quant.row) != 0) {
    LOG_WARNING("snapshot: key '%.*s' is not whole rows of its quantized format; loaded as bytes",
                static_cast<int>(std::min<size_t>(r.key.size(), 128)), r.key.data());
    return;
  }
  // While loading, the value just made from its STRING section is the
  // store's alone (StrValue objects are never const-constructed): tagged where
  // it is; otherwise (never expected) a copy is.
  if (e->value.use_count() == 1) {
    const_cast<StrValue&>(*e->value).quant = QuantTagOf(r.quant);
    return;
  }
  auto v = StrValue::Copy(e->value->view());
  PION_CHECK(v != nullptr);
  v->quant = QuantTagOf(r.quant);
  const uint64_t before = StrCharge(r.key, e->value), after = StrCharge(r.key, v);
  e->value = std::move(v);
  bytes_ = bytes_ - before + after;
  str_bytes_ = str_bytes_ - before + after;
}

}  // namespace pion::store
