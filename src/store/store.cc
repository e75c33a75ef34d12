#include "store/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "store/layer_rows.h"
#include "store/namespace.h"

namespace pion::store {

Store::Store(StoreConfig cfg) : cfg_(cfg) {}
Store::~Store() { DetachTier(); }

NsPtr Store::Find(std::string_view ns) const {
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  auto it = sh.map.find(ns);
  return it == sh.map.end() ? nullptr : it->second;
}

const NsPtr* Store::NsRefLocked(std::string_view ns) const {
  const Shard& sh = ks_.ShardFor(ns);
  auto it = ks_.MapOf(sh).find(ns);
  return it == ks_.MapOf(sh).end() ? nullptr : &it->second;
}

Namespace* Store::NsFindLocked(std::string_view ns) const {
  const NsPtr* p = NsRefLocked(ns);
  return p != nullptr ? p->get() : nullptr;
}

uint64_t Store::NsCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : ks_.shards()) n += ks_.MapOf(sh).size();
  return n;
}

uint64_t Store::StrCountLocked() const {
  uint64_t n = 0;
  for (const Shard& sh : ks_.shards()) n += ks_.StringsOf(sh).size();
  return n;
}

bool Store::IsNamespaceKeyShared(std::string_view key) const {
  {
    const Shard& sh = ks_.ShardFor(key);
    base::MutexLock l(&sh.mu);
    if (sh.map.find(key) != sh.map.end()) return true;
  }
  std::string_view ns;
  Side side;
  if (!ParseSessionId(key, &ns, &side)) return false;
  const Shard& sh = ks_.ShardFor(ns);
  base::MutexLock l(&sh.mu);
  return sh.map.find(ns) != sh.map.end();
}

NsPtr Store::FindAndTouch(std::string_view ns) {
  NsPtr n = Find(ns);
  if (n) Touch(*n);
  return n;
}

Status Store::AskSubtrees(std::vector<const Namespace*> todo,
                          const std::function<bool(std::string_view ns)>& may_drop) {
  while (!todo.empty()) {
    const Namespace* n = todo.back();
    todo.pop_back();
    if (!may_drop(n->name))
      return Status(Code::kInvalidArgument, Reason::kDropRefused, {}, "drop refused");
    todo.insert(todo.end(), n->children.begin(), n->children.end());
  }
  return Status::OK();
}

const std::shared_ptr<const BlockTable>* Store::BlocksLocked(const Shard& sh, std::string_view ns) {
  auto it = sh.map.find(ns);
  if (it == sh.map.end()) return nullptr;
  Touch(*it->second);
  return NonEmptyBlocks(*it->second);
}

Status Store::FlushAll(uint64_t* lsn) {
  *lsn = 0;
  base::MutexLock reg(&reg_mu_);  // not between a registration's log and apply
  base::ReaderLock gate(&gate_);
  base::MutexLock l(&ks_.mu);
  if (sink_) {
    auto r = sink_->Log(persist::FlushAllRec{});
    if (!r.ok()) return r.status();
    *lsn = *r;
  }
  ClearAllLocked();
  return Status::OK();
}

void Store::ClearAllLocked() {
  if (observer_) observer_->OnFlushAll();
  if (block_observer_) block_observer_->OnAllBlocksCleared();
  for (Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (auto& [name, n] : sh.map) {
      n->dropped = true;
      n->children.clear();
    }
    sh.map.clear();
  }
  ClearStringsLocked();
  bytes_ = 0;
}

std::vector<std::string> Store::NamespaceNames() const {
  base::MutexLock l(&ks_.mu);
  std::vector<std::string> out;
  out.reserve(NsCountLocked());
  for (const Shard& sh : ks_.shards())
    for (const auto& kv : ks_.MapOf(sh)) out.emplace_back(kv.first);
  return out;
}

std::optional<uint64_t> Store::LastHash(const Namespace* n) {
  if (n == nullptr || !n->blocks || n->blocks->hashes.empty()) return std::nullopt;
  return n->blocks->hashes.back();
}

void Store::ReportTableReplaced(const Namespace& n, const BlockTable& fresh) {
  if (n.blocks && !n.blocks->hashes.empty()) block_observer_->OnBlocksRemoved(*n.blocks);
  if (!fresh.hashes.empty()) block_observer_->OnBlocksStored(fresh, LastHash(n.parent.get()));
}

std::vector<ResidentTable> Store::ResidentBlockTables() const {
  base::MutexLock l(&ks_.mu);
  std::vector<std::pair<uint32_t, ResidentTable>> found;
  for (const Shard& sh : ks_.shards()) {
    base::MutexLock sl(&sh.mu);
    for (const auto& kv : sh.map) {
      const Namespace& n = *kv.second;
      if (n.blocks && !n.blocks->hashes.empty())
        found.push_back({n.depth, ResidentTable{n.blocks, LastHash(n.parent.get())}});
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ResidentTable> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

uint64_t Store::NamespaceCount() const {
  base::MutexLock l(&ks_.mu);
  return NsCountLocked();
}

StoreStats Store::Stats() const {
  StoreStats s;
  std::vector<NsPtr> all;
  {
    base::MutexLock l(&ks_.mu);
    s.registered_prefixes = NsCountLocked();
    s.sessions = 2 * s.registered_prefixes;
    s.max_sessions = cfg_.max_sessions;
    s.evictions = evictions_;
    s.bytes = bytes_ + tier_uncharged_;  // held, in RAM or on disk
    s.max_bytes = cfg_.max_bytes;
    all.reserve(s.registered_prefixes);
    for (const Shard& sh : ks_.shards())
      for (auto& [name, n] : ks_.MapOf(sh)) {
        all.push_back(n);
        if (n->parent) ++s.linked_prefixes;
        s.allocated_bytes += TableBytes(n->blocks);
      }
  }
  s.total_fetches = total_fetches_.Sum();
  for (const NsPtr& n : all) {
    const RowTally t = TallyRows(*n);
    s.total_tokens += t.rows;
    s.total_prefix_tokens += t.prefix_tokens;
    s.allocated_bytes += t.chunk_bytes;
  }
  return s;
}

}  // namespace pion::store
