// The store's persistence adapter: see persist_adapter.h.
#include "store/persist_adapter.h"

namespace pion::store {

Result<uint64_t> LogSink::OnRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                     quant::Format fmt, const BlockTable* blocks) {
  return log_->OnRegister(ns, incarnation, kv_dim, fmt, blocks);
}

Result<uint64_t> LogSink::OnRegisterChild(std::string_view ns, uint64_t incarnation,
                                          uint32_t kv_dim, quant::Format fmt,
                                          const BlockTable* blocks, std::string_view parent_ns,
                                          uint64_t parent_incarnation) {
  // One-shot form: reserve, then write at once (the store itself reserves).
  std::shared_ptr<const BlockTable> copy;
  if (blocks != nullptr) copy = std::make_shared<BlockTable>(*blocks);
  PendingRecord rec;
  PION_RETURN_IF_ERROR(log_->ReserveRegisterChild(ns, incarnation, kv_dim, fmt, copy, parent_ns,
                                                  parent_incarnation, &rec));
  std::span<const uint8_t> body;
  if (copy) body = {reinterpret_cast<const uint8_t*>(copy->hashes.data()), copy->hashes.size() * 8};
  return rec.write(body);
}

Status LogSink::ReserveRegisterChild(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                     quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                                     std::string_view parent_ns, uint64_t parent_incarnation,
                                     PendingRecord* out) {
  return log_->ReserveRegisterChild(ns, incarnation, kv_dim, fmt, std::move(blocks), parent_ns,
                                    parent_incarnation, out);
}

Result<uint64_t> LogSink::OnStore(std::string_view ns, uint64_t incarnation, Side side,
                                  uint32_t layer, uint64_t start, uint64_t count,
                                  std::span<const uint8_t> stored) {
  return log_->OnStore(ns, incarnation, side, layer, start, count, stored);
}

Result<uint64_t> LogSink::OnDrop(std::string_view ns, uint64_t incarnation, DropReason reason) {
  return log_->OnDrop(ns, incarnation, reason);
}

Result<uint64_t> LogSink::OnFlushAll() { return log_->OnFlushAll(); }

Status LogSink::ReserveStore(std::string_view ns, uint64_t incarnation, Side side, uint32_t layer,
                             uint64_t start, uint64_t count, uint32_t row_bytes,
                             PendingRecord* out) {
  return log_->ReserveStore(ns, incarnation, side, layer, start, count, row_bytes, out);
}

Status LogSink::ReserveRegister(std::string_view ns, uint64_t incarnation, uint32_t kv_dim,
                                quant::Format fmt, std::shared_ptr<const BlockTable> blocks,
                                PendingRecord* out) {
  return log_->ReserveRegister(ns, incarnation, kv_dim, fmt, std::move(blocks), out);
}

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

std::vector<persist::SnapshotNamespace> StorePersistHost::CaptureSnapshot(
    const std::function<Status()>& at_barrier, Status* barrier_status) {
  return ToSnapshotNamespaces(store_->CaptureSnapshot(at_barrier, barrier_status));
}

std::vector<persist::SnapshotString> StorePersistHost::TakeCapturedStrings() {
  std::vector<StrView> in = store_->TakeCapturedStrings();
  std::vector<persist::SnapshotString> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    persist::SnapshotString& o = out[i];
    o.key = std::move(in[i].key);
    o.expire_at_ms = in[i].expire_at_ms;
    o.lru_stamp = in[i].lru_stamp;
    o.data = in[i].value->data;
    o.size = in[i].value->size;
    o.pin = std::move(in[i].value);
  }
  return out;
}

void StorePersistHost::AttachLog(persist::RecordLog* log) {
  if (log == nullptr) {
    store_->SetSink(nullptr);
    sink_.reset();
    return;
  }
  auto sink = std::make_unique<LogSink>(log);
  store_->SetSink(sink.get());
  sink_ = std::move(sink);
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

std::vector<persist::SnapshotNamespace> ToSnapshotNamespaces(const std::vector<NamespaceView>& v) {
  std::vector<persist::SnapshotNamespace> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const NamespaceView& a = v[i];
    persist::SnapshotNamespace& b = out[i];
    b.ns = a.ns;
    b.kv_dim = a.kv_dim;
    b.fmt = a.fmt;
    b.incarnation = a.incarnation;
    b.lru_stamp = a.lru_stamp;
    b.parent = a.parent;
    b.parent_incarnation = a.parent_incarnation;
    b.blocks = a.blocks;
    for (int side = 0; side < 2; ++side) {
      b.layers[side].reserve(a.layers[side].size());
      for (const auto& la : a.layers[side]) {
        persist::SnapshotNamespace::Layer lb;
        lb.layer = la.layer;
        lb.rows = la.rows;
        lb.segments.reserve(la.segments.size());
        for (const auto& seg : la.segments) lb.segments.push_back({seg.chunk, seg.data, seg.rows});
        b.layers[side].push_back(std::move(lb));
      }
    }
  }
  return out;
}

std::unique_ptr<persist::PersistHost> MakePersistHost(Store* store) {
  return std::make_unique<StorePersistHost>(store);
}

std::unique_ptr<persist::RecordSink> MakeRecordSink(Store* store) {
  return std::make_unique<StorePersistHost>(store);
}

}  // namespace pion::store
