// The keyspace's walks (store/key_ops.h): SCAN, KEYS and RANDOMKEY over both
// kinds of key, under ks.mu. String keys are visited in the keyspace's scan
// order (a fixed 64-bit hash per key, so a cursor survives rehashing);
// namespaces by the same hash of their name.
#include <iterator>
#include <mutex>

#include "base/clock.h"
#include "base/strutil.h"
#include "store/expiry.h"
#include "store/key_ops.h"
#include "store/namespace.h"

namespace pion::store {

ScanResult OpScan(const OpArgs& op, uint64_t cursor, uint64_t count,
                  std::optional<std::string_view> match, KeyType type) {
  const Slice& s = op.slice;
  ScanResult out;
  if (count == 0) count = 10;
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  auto it = s.ks.scan_order().lower_bound({cursor, nullptr});
  uint64_t taken = 0;
  uint64_t last = 0;
  bool done = true;
  for (; it != s.ks.scan_order().end(); ++it) {
    if (taken >= count && it->first != last) {
      done = false;
      break;
    }
    last = it->first;
    ++taken;
    const StrEntry& e = *it->second;
    if (Expired(e, now)) continue;
    if (type != KeyType::kNone && type != KeyType::kString) continue;
    if (match && !GlobMatch(*match, *e.key, false)) continue;
    out.keys.push_back(*e.key);
  }
  // Namespaces whose hash falls in the range this call covered.
  uint64_t end = done ? UINT64_MAX : last;
  if (type == KeyType::kNone || type == KeyType::kKvPrefix) {
    for (const Shard& sh : s.ks.shards())
      for (auto& [name, n] : s.ks.MapOf(sh)) {
        uint64_t h = StrHash{}(name);
        if (h < cursor || h > end) continue;
        if (match && !GlobMatch(*match, name, false)) continue;
        out.keys.push_back(name);
      }
  }
  out.cursor = (done || end == UINT64_MAX) ? 0 : end + 1;
  return out;
}

std::vector<std::string> OpKeys(const OpArgs& op, std::string_view pattern) {
  const Slice& s = op.slice;
  std::vector<std::string> out;
  base::MutexLock l(&s.ks.mu);
  int64_t now = UnixMillis();
  for (const Shard& sh : s.ks.shards())
    for (auto& [k, e] : s.ks.StringsOf(sh))
      if (!Expired(e, now) && GlobMatch(pattern, k, false)) out.push_back(k);
  for (const Shard& sh : s.ks.shards())
    for (auto& [name, n] : s.ks.MapOf(sh))
      if (GlobMatch(pattern, name, false)) out.push_back(name);
  return out;
}

std::optional<std::string> OpRandomKey(const OpArgs& op) {
  const Slice& s = op.slice;
  base::MutexLock l(&s.ks.mu);
  const uint64_t nstr = s.StringCountLocked();
  uint64_t total = nstr + s.NamespaceCountLocked();
  if (total == 0) return std::nullopt;
  const uint64_t rnd = s.NextRandomLocked();
  uint64_t r = rnd % total;
  if (r >= nstr) {
    r -= nstr;
    for (const Shard& sh : s.ks.shards()) {
      if (r >= s.ks.MapOf(sh).size()) {
        r -= s.ks.MapOf(sh).size();
        continue;
      }
      auto it = s.ks.MapOf(sh).begin();
      std::advance(it, static_cast<long>(r));
      return it->first;
    }
    return std::nullopt;
  }
  // A random bucket of the shards' tables (one after the other), then the first key on.
  const size_t nb = s.ks.StringBucketsLocked();
  Keyspace::BucketPos p = s.ks.StringBucketLocked(static_cast<size_t>(rnd >> 20) % nb);
  for (size_t k = 0; k < nb; ++k, s.ks.NextStringBucketLocked(&p)) {
    const StrMap& m = s.ks.StringsOf(s.ks.shard(p.shard));
    if (m.begin(p.bucket) != m.end(p.bucket)) return m.begin(p.bucket)->first;
  }
  return std::nullopt;
}

}  // namespace pion::store
