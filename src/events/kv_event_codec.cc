#include "events/kv_event_codec.h"

#include <cstring>
#include <msgpack/pack.hpp>
#include <optional>
#include <span>

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

// The constant runs of bytes around an event's variable fields, packed once per
// medium (by msgpack's own packer, so they are byte for byte what it writes).
struct Pieces {
  std::string medium;
  std::string stored_head;   // {9 keys: "type": "BlockStored", "block_hashes":
  std::string parent_key;    // "parent_block_hash":
  std::string stored_mid;    // "token_ids": [], "block_size":
  std::string stored_tail;   // "lora_id": nil, "medium": m, "lora_name": nil, "group_idx": 0}
  std::string removed_head;  // {4 keys: "type": "BlockRemoved", "block_hashes":
  std::string removed_tail;  // "medium": m, "group_idx": 0}
  std::string cleared;       // {"type": "AllBlocksCleared"}
};

const Pieces& PiecesFor(std::string_view medium) {
  thread_local Pieces p;
  thread_local bool built = false;
  if (built && p.medium == medium) return p;
  auto pack = [](std::string* out, auto&& fn) {
    out->clear();
    StringSink sink{out};
    Packer pk(sink);
    fn(pk);
  };
  p.medium = std::string(medium);
  pack(&p.stored_head, [](Packer& pk) {
    pk.pack_map(9);
    Str(pk, "type");
    Str(pk, "BlockStored");
    Str(pk, "block_hashes");
  });
  pack(&p.parent_key, [](Packer& pk) { Str(pk, "parent_block_hash"); });
  pack(&p.stored_mid, [](Packer& pk) {
    Str(pk, "token_ids");
    pk.pack_array(0);
    Str(pk, "block_size");
  });
  pack(&p.stored_tail, [medium](Packer& pk) {
    Str(pk, "lora_id");
    pk.pack_nil();
    Str(pk, "medium");
    Str(pk, medium);
    Str(pk, "lora_name");
    pk.pack_nil();
    Str(pk, "group_idx");
    pk.pack_uint32(0);
  });
  pack(&p.removed_head, [](Packer& pk) {
    pk.pack_map(4);
    Str(pk, "type");
    Str(pk, "BlockRemoved");
    Str(pk, "block_hashes");
  });
  pack(&p.removed_tail, [medium](Packer& pk) {
    Str(pk, "medium");
    Str(pk, medium);
    Str(pk, "group_idx");
    pk.pack_uint32(0);
  });
  pack(&p.cleared, [](Packer& pk) {
    pk.pack_map(1);
    Str(pk, "type");
    Str(pk, "AllBlocksCleared");
  });
  built = true;
  return p;
}

// The variable fields, written straight into a buffer sized in advance, in
// msgpack's smallest encodings (as its packer chooses them).
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  char* end() const { return p_; }
  void Bytes(const std::string& s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Nil() { *p_++ = static_cast<char>(0xc0); }
  void Uint(uint64_t v) {
    if (v < 128) {
      *p_++ = static_cast<char>(v);
    } else if (v < 0x100) {
      *p_++ = static_cast<char>(0xcc);
      *p_++ = static_cast<char>(v);
    } else if (v < 0x10000) {
      *p_++ = static_cast<char>(0xcd);
      Be(v, 2);
    } else if (v < 0x100000000ull) {
      *p_++ = static_cast<char>(0xce);
      Be(v, 4);
    } else {
      *p_++ = static_cast<char>(0xcf);
      Be(v, 8);
    }
  }
  void Array(size_t n) {
    if (n < 16) {
      *p_++ = static_cast<char>(0x90 | n);
    } else if (n < 0x10000) {
      *p_++ = static_cast<char>(0xdc);
      Be(n, 2);
    } else {
      *p_++ = static_cast<char>(0xdd);
      Be(n, 4);
    }
  }
  void Hashes(std::span<const uint64_t> hashes) {
    Array(hashes.size());
    for (uint64_t h : hashes) Uint(h);
  }

 private:
  void Be(uint64_t v, int n) {  // the low n bytes, big-endian
    const uint64_t be = __builtin_bswap64(v << (8 * (8 - n)));
    std::memcpy(p_, &be, 8);  // the buffer has room: its bound counts 9 bytes a value
    p_ += n;
  }
  char* p_;
};

// At most this many bytes: the constant runs, a u64 per hash and for the parent
// and the block size, an array header, and room for Be() writing 8 bytes for fewer.
size_t Bound(const Pieces& pc, KvEventType type, size_t hashes) {
  const size_t variable = 9 * hashes + 9 + 9 + 5 + 8;
  switch (type) {
    case KvEventType::kBlockStored:
      return pc.stored_head.size() + pc.parent_key.size() + pc.stored_mid.size() +
             pc.stored_tail.size() + variable;
    case KvEventType::kBlockRemoved:
      return pc.removed_head.size() + pc.removed_tail.size() + variable;
    case KvEventType::kAllBlocksCleared:
      break;
  }
  return pc.cleared.size();
}

void Event(Writer& w, const Pieces& pc, KvEventType type, std::span<const uint64_t> hashes,
           std::optional<uint64_t> parent, uint32_t block_size) {
  switch (type) {
    case KvEventType::kBlockStored:
      w.Bytes(pc.stored_head);
      w.Hashes(hashes);
      w.Bytes(pc.parent_key);
      if (parent) {
        w.Uint(*parent);
      } else {
        w.Nil();
      }
      w.Bytes(pc.stored_mid);
      w.Uint(block_size);
      w.Bytes(pc.stored_tail);
      return;
    case KvEventType::kBlockRemoved:
      w.Bytes(pc.removed_head);
      w.Hashes(hashes);
      w.Bytes(pc.removed_tail);
      return;
    case KvEventType::kAllBlocksCleared:
      w.Bytes(pc.cleared);
      return;
  }
}

void Header(double ts, uint64_t count, std::string* out) {
  StringSink sink{out};
  Packer pk(sink);
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(count));
}

}  // namespace

void EncodeKvEventBatch(const KvEventBatch& batch, std::string_view medium, std::string* out) {
  const Pieces& pc = PiecesFor(medium);
  Header(batch.ts, batch.events.size(), out);
  size_t bound = 1;  // the rank
  for (const KvEvent& e : batch.events) bound += Bound(pc, e.type, e.block_hashes.size());
  const size_t at = out->size();
  out->resize(at + bound);
  Writer w(out->data() + at);
  for (const KvEvent& e : batch.events)
    Event(w, pc, e.type, e.block_hashes, e.parent_block_hash, e.block_size);
  w.Uint(0);  // data-parallel rank: pion is one rank
  out->resize(static_cast<size_t>(w.end() - out->data()));
}

void AppendKvEvent(KvEventType type, std::span<const uint64_t> hashes,
                   std::optional<uint64_t> parent, uint32_t block_size, std::string_view medium,
                   KvEncodedEvents* out) {
  const Pieces& pc = PiecesFor(medium);
  std::string& body = out->body;
  const size_t at = body.size();
  body.resize(at + Bound(pc, type, hashes.size()));
  Writer w(body.data() + at);
  Event(w, pc, type, hashes, parent, block_size);
  body.resize(static_cast<size_t>(w.end() - body.data()));
  ++out->count;
}

void EncodeKvEventPayload(double ts, const KvEncodedEvents& events, std::string* out) {
  Header(ts, events.count, out);
  out->append(events.body);
  out->push_back('\0');  // data-parallel rank 0
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
