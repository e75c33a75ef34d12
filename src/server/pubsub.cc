#include "server/pubsub.h"

#include <algorithm>
#include <mutex>

#include "base/strutil.h"

namespace pion::server {

namespace {

void AppendBulk(std::string* out, std::string_view s) {
  out->push_back('$');
  out->append(std::to_string(s.size()));
  out->append("\r\n");
  out->append(s);
  out->append("\r\n");
}

bool StartsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}

}  // namespace

std::string PubSub::FormatMessage(std::string_view kind, std::string_view channel,
                                  std::string_view message) {
  std::string m;
  m.reserve(40 + kind.size() + channel.size() + message.size());
  m.append("*3\r\n");
  AppendBulk(&m, kind);
  AppendBulk(&m, channel);
  AppendBulk(&m, message);
  return m;
}

std::string PubSub::FormatPatternMessage(std::string_view pattern, std::string_view channel,
                                         std::string_view message) {
  std::string m;
  m.reserve(56 + pattern.size() + channel.size() + message.size());
  m.append("*4\r\n$8\r\npmessage\r\n");
  AppendBulk(&m, pattern);
  AppendBulk(&m, channel);
  AppendBulk(&m, message);
  return m;
}

bool PubSub::MayHearKeyspace(Kind k, std::string_view name) {
  static constexpr std::string_view kSpace = "__keyspace@", kEvent = "__keyevent@";
  if (k == kShard) return false;  // notifications publish to plain channels
  std::string_view lit = name;
  if (k == kPattern) {
    size_t i = name.find_first_of("*?[\\");
    if (i != std::string_view::npos) {
      lit = name.substr(0, i);
      // The literal part is all that must agree; what follows may match anything.
      return StartsWith(kSpace, lit) || StartsWith(kEvent, lit) || StartsWith(lit, kSpace) ||
             StartsWith(lit, kEvent);
    }
  }
  return StartsWith(lit, kSpace) || StartsWith(lit, kEvent);
}

bool PubSub::Subscribe(Kind k, int worker, uint64_t id, std::string_view name, size_t* count) {
  std::unique_lock<std::shared_mutex> l(mu_);
  ClientSubs& c = clients_[id];
  c.worker = worker;
  bool added;
  if (k == kPattern) {
    added = std::find(c.patterns.begin(), c.patterns.end(), name) == c.patterns.end();
    if (added) c.patterns.emplace_back(name);
  } else {
    added = (k == kChannel ? c.channels : c.shards).emplace(name).second;
  }
  if (added) {
    MapOf(k)[std::string(name)].push_back({worker, id});
    total_.fetch_add(1, std::memory_order_relaxed);
    if (MayHearKeyspace(k, name)) key_listeners_.fetch_add(1, std::memory_order_relaxed);
  }
  *count = CountFor(k, c);
  return added;
}

void PubSub::RemoveFromMap(Kind k, std::string_view name, uint64_t id) {
  Map& m = MapOf(k);
  auto it = m.find(std::string(name));
  if (it == m.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(), [id](const Sub& s) { return s.id == id; }), v.end());
  if (v.empty()) m.erase(it);  // no empty entries: PUBSUB CHANNELS lists live channels only
  total_.fetch_sub(1, std::memory_order_relaxed);
  if (MayHearKeyspace(k, name)) key_listeners_.fetch_sub(1, std::memory_order_relaxed);
}

bool PubSub::Unsubscribe(Kind k, uint64_t id, std::string_view name, size_t* count) {
  std::unique_lock<std::shared_mutex> l(mu_);
  auto ci = clients_.find(id);
  if (ci == clients_.end()) {
    *count = 0;
    return false;
  }
  ClientSubs& c = ci->second;
  bool removed = false;
  if (k == kPattern) {
    auto it = std::find(c.patterns.begin(), c.patterns.end(), name);
    if (it != c.patterns.end()) {
      c.patterns.erase(it);
      removed = true;
    }
  } else {
    auto& set = k == kChannel ? c.channels : c.shards;
    removed = set.erase(std::string(name)) > 0;
  }
  if (removed) RemoveFromMap(k, name, id);
  *count = CountFor(k, c);
  if (c.channels.empty() && c.patterns.empty() && c.shards.empty()) clients_.erase(ci);
  return removed;
}

std::vector<std::string> PubSub::ClientList(Kind k, uint64_t id) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  auto ci = clients_.find(id);
  if (ci == clients_.end()) return {};
  const ClientSubs& c = ci->second;
  if (k == kPattern) return c.patterns;
  const auto& set = k == kChannel ? c.channels : c.shards;
  return std::vector<std::string>(set.begin(), set.end());
}

void PubSub::ClientCounts(uint64_t id, size_t* sub, size_t* psub, size_t* ssub) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  auto ci = clients_.find(id);
  *sub = *psub = *ssub = 0;
  if (ci == clients_.end()) return;
  *sub = ci->second.channels.size();
  *psub = ci->second.patterns.size();
  *ssub = ci->second.shards.size();
}

void PubSub::RemoveClient(uint64_t id) {
  std::unique_lock<std::shared_mutex> l(mu_);
  auto ci = clients_.find(id);
  if (ci == clients_.end()) return;
  for (const std::string& ch : ci->second.channels) RemoveFromMap(kChannel, ch, id);
  for (const std::string& p : ci->second.patterns) RemoveFromMap(kPattern, p, id);
  for (const std::string& s : ci->second.shards) RemoveFromMap(kShard, s, id);
  clients_.erase(ci);
}

size_t PubSub::Publish(bool shard, std::string_view channel, std::string_view message) {
  if (!any()) return 0;
  size_t receivers = 0;
  std::shared_lock<std::shared_mutex> l(mu_);
  const Map& m = shard ? shards_ : channels_;
  if (!m.empty()) {
    auto it = m.find(std::string(channel));
    if (it != m.end()) {
      auto msg = std::make_shared<const std::string>(
          FormatMessage(shard ? "smessage" : "message", channel, message));
      for (const Sub& s : it->second) sink_->Push(s.worker, s.id, msg);
      receivers += it->second.size();
    }
  }
  if (shard) return receivers;  // shard channels ignore patterns
  for (const auto& [pattern, subs] : patterns_) {
    if (!GlobMatch(pattern, channel, false)) continue;
    auto msg = std::make_shared<const std::string>(FormatPatternMessage(pattern, channel, message));
    for (const Sub& s : subs) sink_->Push(s.worker, s.id, msg);
    receivers += subs.size();
  }
  return receivers;
}

std::vector<std::string> PubSub::Channels(bool shard, bool has_pattern,
                                          std::string_view pattern) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [name, subs] : shard ? shards_ : channels_)
    if (!has_pattern || GlobMatch(pattern, name, false)) out.push_back(name);
  return out;
}

size_t PubSub::NumSub(bool shard, std::string_view channel) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  const Map& m = shard ? shards_ : channels_;
  auto it = m.find(std::string(channel));
  return it == m.end() ? 0 : it->second.size();
}

size_t PubSub::NumPat() const {
  std::shared_lock<std::shared_mutex> l(mu_);
  return patterns_.size();
}

std::vector<PubSub::ClientView> PubSub::Clients() const {
  std::shared_lock<std::shared_mutex> l(mu_);
  std::vector<ClientView> out;
  out.reserve(clients_.size());
  for (const auto& [id, c] : clients_) {
    ClientView v{id, c.worker, {}, c.patterns, {}};
    v.channels.assign(c.channels.begin(), c.channels.end());
    v.shards.assign(c.shards.begin(), c.shards.end());
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace pion::server
