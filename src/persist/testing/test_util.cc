// Test helpers: see test_util.h.
#include "persist/testing/test_util.h"

#include <cstring>
#include <random>

#include "store/prefix_ops.h"

namespace pion::persist::testing {

StoreDump Dump(store::Store& s) {
  Status st;
  auto views = s.CaptureSnapshot(nullptr, &st);
  StoreDump out;
  for (const auto& v : views) {
    std::string d = "dim=" + std::to_string(v.kv_dim) +
                    " fmt=" + std::string(quant::FormatName(v.fmt)) +
                    " inc=" + std::to_string(v.incarnation);
    if (!v.parent.empty()) d += " parent=" + v.parent + "/" + std::to_string(v.parent_incarnation);
    if (v.blocks) {
      d += " blocks=" + std::to_string(v.blocks->block_size) + ":";
      d.append(reinterpret_cast<const char*>(v.blocks->hashes.data()), v.blocks->hashes.size() * 8);
    }
    size_t rb = quant::RowBytes(v.fmt, v.kv_dim);
    for (int side = 0; side < 2; ++side) {
      for (const auto& lv : v.layers[side]) {
        d += " |" + std::to_string(side) + "/" + std::to_string(lv.layer) + ":" +
             std::to_string(lv.rows) + ":";
        for (const auto& seg : lv.segments) {
          if (seg.data)
            d.append(reinterpret_cast<const char*>(seg.data), seg.rows * rb);
          else
            d.append(seg.rows * rb, '\0');
        }
      }
    }
    out[v.ns] = std::move(d);
  }
  // String keys (captured at the same barrier), with their expiry.
  // A block (KV.BLOCK.CHAIN) adds its link, hash and tokens.
  for (const SnapshotString& k : s.TakeCapturedStrings()) {
    std::string d = "exp=" + std::to_string(k.expire_at_ms) + " " +
                    std::string(reinterpret_cast<const char*>(k.data), k.size);
    if (k.is_block)
      d += " block parent=" + (k.has_parent ? k.parent : std::string("-")) +
           " hash=" + (k.has_hash ? std::to_string(k.hash) : std::string("-")) +
           " tokens=" + std::to_string(k.tokens);
    if (k.quant.row != 0)
      d += " quant=" + std::to_string(static_cast<int>(k.quant.format)) + "/" +
           std::to_string(k.quant.dtype) + "/" + std::to_string(k.quant.row);
    out["string:" + k.key] = std::move(d);
  }
  return out;
}

Status Fill(store::Store& s, const std::string& ns, quant::Format fmt, uint32_t dim,
            uint32_t layers, uint64_t start, uint64_t rows, uint64_t seed, uint64_t* lsn,
            bool blocks) {
  uint64_t l = 0;
  auto bt = std::make_shared<store::BlockTable>();
  store::RegisterArgs ra;
  ra.ns = ns;
  ra.kv_dim = dim;
  ra.fmt = fmt;
  if (blocks) {
    bt->block_size = 16;
    for (uint64_t i = 0; i < 5; ++i) bt->hashes.push_back(seed * 1000003 + i * 7919);
    bt->Finish();
    ra.blocks = bt;
  }
  PION_RETURN_IF_ERROR(store::OpRegister({s, &l}, ra));
  *lsn = std::max(*lsn, l);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> data(rows * dim);
  for (int side = 0; side < 2; ++side) {
    std::string sid = ns + (side == 0 ? "_pk" : "_pv");
    for (uint32_t layer = 0; layer < layers; ++layer) {
      for (auto& x : data) x = nd(rng);
      store::RowInput in;
      in.type = store::RowInput::Type::kF32;
      in.data = data.data();
      in.bytes = data.size() * sizeof(float);
      PION_RETURN_IF_ERROR(store::OpStoreRows({s, &l}, sid, layer, start, rows, in));
      *lsn = std::max(*lsn, l);
    }
  }
  return Status::OK();
}

}  // namespace pion::persist::testing
