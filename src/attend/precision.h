// Precision of a warm attention slot (docs/attention.md §3): f32 (exact), f16 (IEEE half,
// round to nearest even) or int8 (symmetric, one f32 scale per token per head).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pion::attend {

enum class Precision : uint8_t { kF32 = 0, kF16 = 1, kInt8 = 2 };
inline constexpr int kNumPrecisions = 3;

// "f32", "f16", "int8".
std::string_view PrecisionName(Precision p);
// Case-insensitive; nullopt if unknown.
std::optional<Precision> ParsePrecision(std::string_view name);
// Bytes of one stored element (int8: the scale is stored beside, per row).
inline constexpr uint32_t ElementBytes(Precision p) {
  return p == Precision::kF32 ? 4 : p == Precision::kF16 ? 2 : 1;
}

// Sparse-auto block selectors (docs/attention.md §1).
enum class Selector : uint8_t { kBlockMean = 0, kQuest = 1 };
std::string_view SelectorName(Selector s);

}  // namespace pion::attend
