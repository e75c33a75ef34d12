#include "server/tracking.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "server/client_registry.h"
#include "server/pubsub.h"

namespace pion::server {

namespace {

constexpr auto kR = std::memory_order_relaxed;

// Whether `a` and `b` would invalidate a common key: one starts with the other
// (Redis compares the shorter length).
bool PrefixesOverlap(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  return a.substr(0, n) == b.substr(0, n);
}

// Keys invalidated per remembered key past tracking-table-max-keys at most.
constexpr int kLimitEffort = 1000;

// BCAST keys modified by the command this thread runs (see InvalidateKey).
thread_local bool tls_in_command = false;
thread_local std::vector<std::pair<std::string, uint64_t>> tls_bcast_keys;

}  // namespace

std::string Tracking::KeyArray(std::string_view key) {
  std::string s = "*1\r\n$";
  s += std::to_string(key.size());
  s += "\r\n";
  s.append(key);
  s += "\r\n";
  return s;
}

Tracking::Overlap Tracking::CheckPrefixes(uint64_t id, std::span<const std::string_view> prefixes,
                                          std::string* a, std::string* b) const {
  base::MutexLock lk(&mu_);
  auto mine = client_prefixes_.find(id);
  for (size_t i = 0; i < prefixes.size(); ++i) {
    if (mine != client_prefixes_.end()) {
      for (const std::string& old : mine->second.prefixes) {
        if (PrefixesOverlap(old, prefixes[i])) {
          *a = std::string(prefixes[i]);
          *b = old;
          return Overlap::kExisting;
        }
      }
    }
    for (size_t j = i + 1; j < prefixes.size(); ++j) {
      if (PrefixesOverlap(prefixes[i], prefixes[j])) {
        *a = std::string(prefixes[i]);
        *b = std::string(prefixes[j]);
        return Overlap::kProvided;
      }
    }
  }
  return Overlap::kNone;
}

void Tracking::Enable(net::ClientInfo* c, uint64_t redirect, uint32_t options,
                      std::span<const std::string_view> prefixes) {
  uint32_t old = c->tracking.load(kR);
  if (!(old & kTrackOn)) tracking_clients_.fetch_add(1, kR);
  // As Redis: a second ON replaces the mode flags (and forgets a broken
  // redirect); a pending CLIENT CACHING stays.
  uint32_t f = kTrackOn | (old & kTrackCaching) |
               (options & (kTrackBcast | kTrackOptin | kTrackOptout | kTrackNoloop));
  c->tracking_redir.store(redirect, kR);
  c->tracking.store(f, kR);
  if (!(options & kTrackBcast)) return;
  static constexpr std::string_view kEvery[] = {""};
  if (prefixes.empty()) prefixes = kEvery;
  uint64_t mem = 0;
  {
    base::MutexLock lk(&mu_);
    BcastClient& mine = client_prefixes_[c->id];
    mine.noloop = (options & kTrackNoloop) != 0;
    for (std::string_view p : prefixes) {
      if (mine.prefixes.find(p) != mine.prefixes.end()) continue;
      mine.prefixes.emplace(p);
      prefix_table_[std::string(p)].insert(c->id);
    }
    for (const std::string& p : mine.prefixes) mem += PrefixCost(p.size());
  }
  c->service_mem.store(mem, kR);
}

void Tracking::Disable(net::ClientInfo* c) {
  uint32_t old = c->tracking.load(kR);
  if (old & kTrackBcast) {
    base::MutexLock lk(&mu_);
    auto mine = client_prefixes_.find(c->id);
    if (mine != client_prefixes_.end()) {
      for (const std::string& p : mine->second.prefixes) {
        auto it = prefix_table_.find(p);
        if (it == prefix_table_.end()) continue;
        it->second.erase(c->id);
        if (it->second.empty()) prefix_table_.erase(it);
      }
      client_prefixes_.erase(mine);
    }
  }
  c->service_mem.store(0, kR);
  if (old & kTrackOn) tracking_clients_.fetch_sub(1, kR);
  c->tracking.store(0, kR);
}

std::vector<std::string> Tracking::Prefixes(uint64_t id) const {
  base::MutexLock lk(&mu_);
  auto it = client_prefixes_.find(id);
  if (it == client_prefixes_.end()) return {};
  return std::vector<std::string>(it->second.prefixes.begin(), it->second.prefixes.end());
}

void Tracking::RememberKeys(const net::ClientInfo& c, std::span<const std::string_view> keys) {
  uint32_t f = c.tracking.load(kR);
  if (!(f & kTrackOn) || (f & kTrackBcast) || keys.empty()) return;
  bool caching = (f & kTrackCaching) != 0;
  if (((f & kTrackOptin) && !caching) || ((f & kTrackOptout) && caching)) return;
  std::vector<Outgoing> out;
  {
    base::MutexLock lk(&mu_);
    for (std::string_view key : keys) {
      auto [it, inserted] = table_.try_emplace(std::string(key));
      if (inserted) total_keys_.fetch_add(1, kR);
      if (it->second.insert(c.id).second) ++total_items_;
    }
    LimitKeysLocked(&out, kLimitEffort);
  }
  for (const Outgoing& o : out) Send(o);
}

void Tracking::TakeKeyLocked(std::string_view key, uint64_t writer, std::vector<Outgoing>* out) {
  auto it = table_.find(std::string(key));
  if (it == table_.end()) return;
  std::string arr = KeyArray(key);
  for (uint64_t id : it->second) out->push_back({id, arr, Kind::kKey, writer});
  total_items_ -= it->second.size();
  table_.erase(it);
  total_keys_.fetch_sub(1, kR);
}

void Tracking::SetMaxKeys(uint64_t n) {
  max_keys_.store(n, kR);
  std::vector<Outgoing> out;
  {
    base::MutexLock lk(&mu_);
    LimitKeysLocked(&out, 0);
  }
  for (const Outgoing& o : out) Send(o);
}

void Tracking::LimitKeysLocked(std::vector<Outgoing>* out, int effort) {
  uint64_t max = max_keys_.load(kR);
  if (max == 0) return;
  if (effort == 0) effort = std::numeric_limits<int>::max();
  for (; effort > 0 && table_.size() > max; --effort) {
    // A random bucket, then the first non-empty one from there.
    random_state_ ^= random_state_ << 13;
    random_state_ ^= random_state_ >> 7;
    random_state_ ^= random_state_ << 17;
    size_t n = table_.bucket_count();
    size_t b = static_cast<size_t>(random_state_ % n);
    while (table_.bucket_size(b) == 0) b = (b + 1) % n;
    std::string key = table_.begin(b)->first;
    TakeKeyLocked(key, 0, out);
  }
}

void Tracking::InvalidateKey(std::string_view key, uint64_t writer) {
  if (!armed()) return;
  std::vector<Outgoing> out;
  bool bcast = false;
  {
    base::MutexLock lk(&mu_);
    bcast = !prefix_table_.empty();
    if (total_keys_.load(kR) > 0) TakeKeyLocked(key, writer, &out);
  }
  for (const Outgoing& o : out) Send(o);
  if (!bcast) return;
  if (tls_in_command) {
    tls_bcast_keys.emplace_back(std::string(key), writer);
  } else {
    std::vector<std::pair<std::string, uint64_t>> one;
    one.emplace_back(std::string(key), writer);
    SendBcast(one);
  }
}

void Tracking::BeginCommand() { tls_in_command = true; }

void Tracking::EndCommand() {
  tls_in_command = false;
  if (tls_bcast_keys.empty()) return;
  std::vector<std::pair<std::string, uint64_t>> keys;
  keys.swap(tls_bcast_keys);
  SendBcast(keys);
}

void Tracking::SendBcast(const std::vector<std::pair<std::string, uint64_t>>& keys) {
  // One key array: the keys of `ks` but those last written by `skip` (0: none).
  auto array = [](const std::map<std::string_view, uint64_t>& ks, uint64_t skip) {
    size_t n = 0;
    for (const auto& [k, w] : ks) n += (skip == 0 || w != skip) ? 1 : 0;
    std::string s;
    if (n == 0) return s;
    s = "*" + std::to_string(n) + "\r\n";
    for (const auto& [k, w] : ks) {
      if (skip != 0 && w == skip) continue;
      s += "$" + std::to_string(k.size()) + "\r\n";
      s.append(k);
      s += "\r\n";
    }
    return s;
  };
  std::vector<Outgoing> out;
  {
    base::MutexLock lk(&mu_);
    if (prefix_table_.empty()) return;
    // Per prefix, its modified keys (byte order, each once) with the client
    // that wrote each last, as Redis's per-prefix key table.
    std::map<std::string_view, std::map<std::string_view, uint64_t>> per_prefix;
    for (const auto& [key, writer] : keys) {
      std::string_view k = key;
      if (prefix_table_.size() <= k.size()) {
        for (const auto& entry : prefix_table_)
          if (k.starts_with(entry.first)) per_prefix[entry.first][k] = writer;
      } else {
        for (size_t len = 0; len <= k.size(); ++len) {
          auto it = prefix_table_.find(k.substr(0, len));
          if (it != prefix_table_.end()) per_prefix[it->first][k] = writer;
        }
      }
    }
    for (const auto& [prefix, ks] : per_prefix) {
      auto it = prefix_table_.find(prefix);
      if (it == prefix_table_.end()) continue;
      std::string common;
      for (uint64_t id : it->second) {
        auto cp = client_prefixes_.find(id);
        if (cp != client_prefixes_.end() && cp->second.noloop) {
          std::string own = array(ks, id);
          if (!own.empty()) out.push_back({id, std::move(own), Kind::kBcast, 0});
        } else {
          if (common.empty()) common = array(ks, 0);
          out.push_back({id, common, Kind::kBcast, 0});
        }
      }
    }
  }
  for (const Outgoing& o : out) Send(o);
}

void Tracking::InvalidateAll() {
  {
    base::MutexLock lk(&mu_);
    table_.clear();
    total_items_ = 0;
    total_keys_.store(0, kR);
  }
  if (tracking_clients_.load(kR) == 0) return;
  std::vector<uint64_t> ids;
  clients_->ForEach([&](const net::ClientInfo& c) {
    if (c.tracking.load(kR) & kTrackOn) ids.push_back(c.id);
  });
  for (uint64_t id : ids) Send({id, std::string(), Kind::kNull, 0});
}

uint64_t Tracking::total_items() const {
  base::MutexLock lk(&mu_);
  return total_items_;
}

uint64_t Tracking::total_prefixes() const {
  base::MutexLock lk(&mu_);
  return prefix_table_.size();
}

void Tracking::Send(const Outgoing& o) {
  bool found = false;
  int worker = -1, proto = 2;
  uint64_t redir = 0;
  clients_->WithId(o.id, [&](net::ClientInfo* c) {
    if (c == nullptr) return;
    uint32_t f = c->tracking.load(kR);
    if (!(f & kTrackOn)) return;
    // A key read in default mode is not sent once the client switched to
    // BCAST (nor a prefix's key once it left BCAST), as Redis.
    if (o.kind == Kind::kKey && (f & kTrackBcast)) return;
    if (o.kind == Kind::kBcast && !(f & kTrackBcast)) return;
    if (o.kind != Kind::kNull && (f & kTrackNoloop) && o.writer == c->id) return;
    found = true;
    worker = c->worker;
    proto = c->proto.load(kR);
    redir = c->tracking_redir.load(kR);
  });
  if (!found) return;
  // A null follows the tracking client's protocol (Redis's shared.null[resp]).
  std::string_view payload = o.keys;
  if (o.kind == Kind::kNull) payload = proto == 3 ? "_\r\n" : "$-1\r\n";
  static constexpr std::string_view kInvalidate = "*2\r\n$10\r\ninvalidate\r\n";
  static constexpr std::string_view kMessage =
      "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n";
  if (redir == 0) {
    // Without a redirect only a RESP3 client can be told (a push).
    if (proto != 3) return;
    auto msg = std::make_shared<std::string>(kInvalidate);
    msg->append(payload);
    sink_->Push(worker, o.id, msg);
    return;
  }
  bool r_found = false, r_pubsub = false;
  int r_worker = -1, r_proto = 2;
  clients_->WithId(redir, [&](net::ClientInfo* r) {
    if (r == nullptr) return;
    r_found = true;
    r_worker = r->worker;
    r_proto = r->proto.load(kR);
    r_pubsub = r->pubsub.load(kR);
  });
  if (!r_found) {
    clients_->WithId(o.id, [&](net::ClientInfo* c) {
      if (c == nullptr) return;
      uint32_t f = c->tracking.load(kR);
      while ((f & kTrackOn) && !(f & kTrackBrokenRedir) &&
             !c->tracking.compare_exchange_weak(f, f | kTrackBrokenRedir, kR)) {
      }
    });
    if (proto == 3) {
      auto msg = std::make_shared<std::string>("*2\r\n$21\r\ntracking-redir-broken\r\n:");
      *msg += std::to_string(redir);
      *msg += "\r\n";
      sink_->Push(worker, o.id, msg);
    }
    return;
  }
  std::shared_ptr<std::string> msg;
  if (r_proto == 3)
    msg = std::make_shared<std::string>(kInvalidate);
  else if (r_pubsub)
    msg = std::make_shared<std::string>(kMessage);
  else
    return;  // a RESP2 client that is not subscribed cannot be told
  msg->append(payload);
  sink_->Push(r_worker, redir, msg);
}

}  // namespace pion::server
