// The wire form of a KV-event batch (docs/kv_events.md "Wire"): msgpack of
// [ts float64, [event map, ...], 0], each event a map tagged "type" with
// exactly vLLM's fields, so every consumer of vLLM's stream (llm-d's indexer,
// Dynamo's, vllm-project/router) decodes it unchanged. Hashes are unsigned
// 64-bit integers; `medium` is the same string on every stored or removed event.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "events/kv_event.h"

namespace pion::events {

// Appends the encoded payload of `batch` to `out`.
void EncodeKvEventBatch(const KvEventBatch& batch, std::string_view medium, std::string* out);

// The 8-byte big-endian form of a sequence number, as the stream's second frame.
std::string EncodeSeq(uint64_t seq);

}  // namespace pion::events
