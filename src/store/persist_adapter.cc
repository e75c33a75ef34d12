// The store's persistence adapter: see persist_adapter.h.
#include "store/persist_adapter.h"

namespace pion::store {

Status StorePersistHost::Apply(const persist::Record& r) {
  using namespace persist;  // NOLINT: the record kinds
  Store* st = store_;
  // One case per kind, no default: a new kind that is not applied here does
  // not compile.
  return std::visit(Overloaded{
                        [st](const RegisterRec& x) {
                          BlockRecord b;
                          if (x.has_blocks) b = BlockRecordOf(x);
                          return st->ApplyRegister(x.ns, x.incarnation, x.kv_dim, x.fmt,
                                                   x.has_blocks ? &b : nullptr, x.parent,
                                                   x.parent_incarnation);
                        },
                        [st](const StoreRec& x) {
                          return st->ApplyStored(x.ns, x.incarnation, x.side, x.layer, x.start,
                                                 x.count, x.rows, x.backing);
                        },
                        [st](const DropRec& x) {
                          st->ApplyDrop(x.ns, x.incarnation);
                          return Status::OK();
                        },
                        [st](const FlushAllRec&) {
                          st->ApplyFlushAll();
                          return Status::OK();
                        },
                        [st](const StrSetRec& x) {
                          st->ApplyStrSet(x.key, x.expire_at_ms, x.lru_stamp, x.value);
                          return Status::OK();
                        },
                        [st](const StrDelRec& x) {
                          st->ApplyStrDel(x.key);
                          return Status::OK();
                        },
                        [st](const StrExpireRec& x) {
                          st->ApplyStrExpire(x.key, x.expire_at_ms);
                          return Status::OK();
                        },
                        [st](const StrRenameRec& x) {
                          st->ApplyStrRename(x.key, x.dst);
                          return Status::OK();
                        },
                        [st](const StrPatchRec& x) {
                          st->ApplyStrPatch(x.key, x.expire_at_ms, x.offset, x.bytes, x.truncate);
                          return Status::OK();
                        },
                        [st](const StrChainRecord& x) {
                          st->ApplyStrChain(x);
                          return Status::OK();
                        },
                        [st](const LruStampRec& x) {
                          st->SetLruStamp(x.ns, x.stamp);
                          return Status::OK();
                        },
                        [st](const StrBlockRecord& x) {
                          st->ApplyStrBlock(x);
                          return Status::OK();
                        },
                        [st](const StrQuantRecord& x) {
                          st->ApplyStrQuant(x);
                          return Status::OK();
                        },
                        [st](const StrTierRecord& x) {
                          st->ApplyStrTier(x);
                          return Status::OK();
                        },
                        [st](const NsTierRecord& x) {
                          st->ApplyNamespaceTier(x);
                          return Status::OK();
                        },
                    },
                    r);
}

persist::HostCounts StorePersistHost::Counts() const {
  persist::HostCounts c;
  c.namespaces = store_->NamespaceCount();
  StoreStats st = store_->Stats();
  c.sessions = st.sessions;
  c.rows = st.total_tokens;
  c.bytes = st.bytes;
  return c;
}

std::unique_ptr<persist::PersistHost> MakePersistHost(Store* store) {
  return std::make_unique<StorePersistHost>(store);
}

std::unique_ptr<persist::RecordSink> MakeRecordSink(Store* store) {
  return std::make_unique<StorePersistHost>(store);
}

}  // namespace pion::store
