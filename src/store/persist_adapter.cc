// The store's persistence adapter: see persist_adapter.h.
#include "store/persist_adapter.h"

namespace pion::store {

Status StorePersistHost::ApplyRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                       quant::Format fmt, const persist::BlockRecord* blocks) {
  return store_->ApplyRegister(ns, incarnation, kv_dim, fmt, blocks);
}

Status StorePersistHost::ApplyStored(std::string_view ns, uint64_t incarnation, Side side,
                                     uint32_t layer, uint64_t start, uint64_t count,
                                     std::span<const uint8_t> stored) {
  return store_->ApplyStored(ns, incarnation, side, layer, start, count, stored);
}

Status StorePersistHost::ApplyRegisterChild(std::string_view ns, uint64_t incarnation,
                                            uint32_t kv_dim, quant::Format fmt,
                                            const persist::BlockRecord* blocks,
                                            std::string_view parent_ns,
                                            uint64_t parent_incarnation) {
  return store_->ApplyRegister(ns, incarnation, kv_dim, fmt, blocks, parent_ns, parent_incarnation);
}

void StorePersistHost::ApplyDrop(std::string_view ns, uint64_t incarnation) {
  store_->ApplyDrop(ns, incarnation);
}

void StorePersistHost::ApplyFlushAll() { store_->ApplyFlushAll(); }

void StorePersistHost::SetLruStamp(std::string_view ns, uint64_t stamp) {
  store_->SetLruStamp(ns, stamp);
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
