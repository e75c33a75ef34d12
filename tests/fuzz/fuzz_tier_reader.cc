// libFuzzer target for the disk tier's file reader: the header decoder
// (DecodeHeader, what every tier read runs first) and the checker pion-check runs
// over a whole tier file (src/tier/tier_check.h). Arbitrary bytes must give a
// report or a Corruption status, never a crash, an out-of-bounds read or a hang.
// The first input byte picks the mode; the rest is the file:
//
//  bit 0 set: at every 4,096-byte boundary that starts with the magic, the harness
//             rewrites the header (EncodeHeader: version, header CRC) from the
//             fields the input gives, and with bit 1 also sets the value CRC to the
//             value's bytes when they fit, so inputs reach the value check and the
//             skipping over whole extents. Clear: the bytes as they are.
//  bit 2 set: the source reports every run of zero bytes as a hole, at byte (not
//             block) granularity, as SEEK_DATA on an odd file system might.
//
// Seeds: tests/fuzz/corpus/tier (tests/fuzz/make_seeds.py).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/crc32c.h"
#include "tier/tier_check.h"
#include "tier/tier_file.h"

namespace {

using namespace pion::tier;

uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Zero runs read as holes: NextData skips to the next non-zero byte.
class HoleySource : public MemoryTierSource {
 public:
  HoleySource(const uint8_t* p, size_t n) : MemoryTierSource(p, n), p_(p), n_(n) {}
  uint64_t NextData(uint64_t off) const override {
    while (off < n_ && p_[off] == 0) ++off;
    return off;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

void FixHeaders(std::vector<uint8_t>& f, bool value_crc) {
  for (size_t off = 0; off + kBlock <= f.size(); off += kBlock) {
    uint8_t* h = f.data() + off;
    if (std::memcmp(h, kMagic, 8) != 0) continue;
    const uint64_t hb = Get32(h + 12), klen = Get32(h + 24), vlen = Get64(h + 16);
    if (hb == 0 || hb % kBlock != 0 || hb < kHeaderFixed + klen || hb > f.size() - off) continue;
    uint32_t crc = Get32(h + 28);
    if (value_crc && vlen <= f.size() - off - hb) crc = pion::crc32c::Value(h + hb, vlen);
    // EncodeHeader copies the key from its argument: take it out of the header first.
    std::string key(reinterpret_cast<const char*>(h + 64), klen);
    EncodeHeader(h, static_cast<uint32_t>(hb), key, vlen, crc, Get64(h + 32));
  }
}

void CheckReport(const TierCheckReport& rep, uint64_t size) {
  PION_CHECK(rep.file_bytes == size);
  PION_CHECK(rep.value_bytes <= rep.extent_bytes);
  PION_CHECK(rep.extent_bytes + rep.hole_bytes + rep.zero_bytes + rep.stray_bytes <= size);
  uint64_t last = 0, stray = 0;
  for (const auto& s : rep.stray) {
    PION_CHECK(s.bytes > 0 && s.offset >= last && s.offset + s.bytes <= size);
    last = s.offset + s.bytes;
    stray += s.bytes;
  }
  PION_CHECK(stray == rep.stray_bytes);
  for (const auto& d : rep.damaged) PION_CHECK(d.offset % kBlock == 0 && d.offset < size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> file(data + 1, data + size);
  if (mode & 1) FixHeaders(file, (mode & 2) != 0);

  // The decoder on its own, at the start and at every block boundary.
  for (size_t off = 0; off < file.size(); off += kBlock) {
    uint32_t hb = 0, crc = 0;
    uint64_t vlen = 0;
    std::string_view key;
    if (DecodeHeader(file.data() + off, file.size() - off, &hb, &vlen, &key, &crc).ok()) {
      PION_CHECK(hb % kBlock == 0 && hb <= file.size() - off);
      PION_CHECK(reinterpret_cast<const uint8_t*>(key.data()) == file.data() + off + 64);
      PION_CHECK(64 + key.size() <= hb);
    }
  }

  TierCheckReport rep;
  if (mode & 4) {
    HoleySource src(file.data(), file.size());
    PION_CHECK(CheckTier(src, &rep).ok());
  } else {
    MemoryTierSource src(file.data(), file.size());
    PION_CHECK(CheckTier(src, &rep).ok());
  }
  CheckReport(rep, file.size());
  return 0;
}
