#include "events/kv_event_codec.h"

#include <msgpack/pack.hpp>

namespace pion::events {

namespace {

// msgpack's packer writes into any type with write(const char*, size_t); its own
// sbuffer throws on allocation failure, which this build (no exceptions) cannot have.
struct StringSink {
  std::string* s;
  void write(const char* p, size_t n) { s->append(p, n); }
};
using Packer = msgpack::packer<StringSink>;

void Str(Packer& pk, std::string_view v) {
  pk.pack_str(static_cast<uint32_t>(v.size()));
  pk.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
}

void Hashes(Packer& pk, const std::vector<uint64_t>& hashes) {
  pk.pack_array(static_cast<uint32_t>(hashes.size()));
  for (uint64_t h : hashes) pk.pack_uint64(h);
}

void Event(Packer& pk, const KvEvent& e, std::string_view medium) {
  switch (e.type) {
    case KvEventType::kBlockStored:
      pk.pack_map(9);
      Str(pk, "type");
      Str(pk, "BlockStored");
      Str(pk, "block_hashes");
      Hashes(pk, e.block_hashes);
      Str(pk, "parent_block_hash");
      if (e.parent_block_hash) {
        pk.pack_uint64(*e.parent_block_hash);
      } else {
        pk.pack_nil();
      }
      Str(pk, "token_ids");
      pk.pack_array(0);
      Str(pk, "block_size");
      pk.pack_uint32(e.block_size);
      Str(pk, "lora_id");
      pk.pack_nil();
      Str(pk, "medium");
      Str(pk, medium);
      Str(pk, "lora_name");
      pk.pack_nil();
      Str(pk, "group_idx");
      pk.pack_uint32(0);
      return;
    case KvEventType::kBlockRemoved:
      pk.pack_map(4);
      Str(pk, "type");
      Str(pk, "BlockRemoved");
      Str(pk, "block_hashes");
      Hashes(pk, e.block_hashes);
      Str(pk, "medium");
      Str(pk, medium);
      Str(pk, "group_idx");
      pk.pack_uint32(0);
      return;
    case KvEventType::kAllBlocksCleared:
      pk.pack_map(1);
      Str(pk, "type");
      Str(pk, "AllBlocksCleared");
      return;
  }
}

}  // namespace

void EncodeKvEventBatch(const KvEventBatch& batch, std::string_view medium, std::string* out) {
  StringSink sink{out};
  Packer pk(sink);
  pk.pack_array(3);
  pk.pack_double(batch.ts);
  pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvEvent& e : batch.events) Event(pk, e, medium);
  pk.pack_uint32(0);  // data-parallel rank: pion is one rank
}

std::string EncodeSeq(uint64_t seq) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return s;
}

}  // namespace pion::events
