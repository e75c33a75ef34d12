// The wire form of a KV-event batch (docs/kv_events.md "Wire"): msgpack of
// [ts float64, [event map, ...], 0], each event a map tagged "type" with
// exactly vLLM's fields, so every consumer of vLLM's stream (llm-d's indexer,
// Dynamo's, vllm-project/router) decodes it unchanged. Hashes are unsigned
// 64-bit integers; `medium` is the same string on every stored or removed event.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "events/kv_event.h"

namespace pion::events {

// Appends the encoded payload of `batch` to `out`.
void EncodeKvEventBatch(const KvEventBatch& batch, std::string_view medium, std::string* out);

// A batch's events encoded as they are made (a worker's buffer): the body of the
// payload's event array, and how many events it holds.
struct KvEncodedEvents {
  uint64_t count = 0;
  std::string body;
};

// Appends one event's map to `out` (the fields a `type` has no use for are ignored).
void AppendKvEvent(KvEventType type, std::span<const uint64_t> hashes,
                   std::optional<uint64_t> parent, uint32_t block_size, std::string_view medium,
                   KvEncodedEvents* out);

// Appends the payload of a batch of `events` formed at `ts` to `out`: the same
// bytes as EncodeKvEventBatch of those events.
void EncodeKvEventPayload(double ts, const KvEncodedEvents& events, std::string* out);

// The 8-byte big-endian form of a sequence number, as the stream's second frame.
std::string EncodeSeq(uint64_t seq);

}  // namespace pion::events
