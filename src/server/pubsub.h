// PubSub: the server-wide subscription registry (SUBSCRIBE, PSUBSCRIBE,
// SSUBSCRIBE and PUBLISH/SPUBLISH; docs/ARCHITECTURE.md "Pub/Sub").
//
// One registry serves every worker. A subscriber is named by its owning worker
// and client id, never by a pointer: the registry is written only by the
// subscriber's own worker (its subscribe and unsubscribe commands, RESET, its
// close), read by any worker that publishes. A publisher formats each message
// once (the RESP2 form, "*3\r\n$7\r\nmessage..."), and hands a shared copy to
// the owning worker of every receiver through a PushSink (Worker::DeliverPush:
// a mailbox drained on that worker's loop, which turns the header into a RESP3
// push on a RESP3 connection). No thread touches another worker's connection.
//
// Keyspace notifications (notify.h) publish through the same registry; they
// first ask key_listeners(), one relaxed load, so nothing is formatted while no
// subscription could match a "__keyspace@" / "__keyevent@" channel.
//
// Thread-safety: every method may be called from any thread (a shared_mutex:
// PUBLISH and the introspection commands take it shared).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace pion::server {

// Where a formatted message goes: client `id` owned by worker `worker`.
class PushSink {
 public:
  virtual void Push(int worker, uint64_t id, const std::shared_ptr<const std::string>& msg) = 0;

 protected:
  ~PushSink() = default;
};

class PubSub {
 public:
  // Channels (SUBSCRIBE), patterns (PSUBSCRIBE), shard channels (SSUBSCRIBE).
  enum Kind { kChannel = 0, kPattern = 1, kShard = 2 };

  explicit PubSub(PushSink* sink) : sink_(sink) {}

  // Subscribes client `id` (owned by `worker`) to `name`; false if it already
  // was. `*count` gets the count Redis replies with: channels + patterns for
  // kChannel and kPattern, shard channels for kShard.
  bool Subscribe(Kind k, int worker, uint64_t id, std::string_view name, size_t* count);
  // False if the client was not subscribed to `name`.
  bool Unsubscribe(Kind k, uint64_t id, std::string_view name, size_t* count);
  // The client's subscriptions of kind `k` (patterns in subscription order).
  std::vector<std::string> ClientList(Kind k, uint64_t id) const;
  // Counts of client `id` (CLIENT LIST's sub= psub= ssub=).
  void ClientCounts(uint64_t id, size_t* sub, size_t* psub, size_t* ssub) const;
  // Drops every subscription of client `id` (close, RESET).
  void RemoveClient(uint64_t id);

  // PUBLISH / SPUBLISH: delivers to channel subscribers and (not for shard
  // channels) to every matching pattern; returns the number of receivers.
  size_t Publish(bool shard, std::string_view channel, std::string_view message);

  // PUBSUB CHANNELS / SHARDCHANNELS (pattern empty and !has_pattern: all).
  std::vector<std::string> Channels(bool shard, bool has_pattern, std::string_view pattern) const;
  size_t NumSub(bool shard, std::string_view channel) const;
  size_t NumPat() const;
  // Every (worker, id) subscribed to something, with its channels and patterns
  // (ACL: the clients of a user whose channel rights shrank).
  struct ClientView {
    uint64_t id;
    int worker;
    std::vector<std::string> channels, patterns, shards;
  };
  std::vector<ClientView> Clients() const;

  // Whether a subscription could receive a keyspace notification (one relaxed
  // load: keyspace notifications return at once when it is false).
  bool key_listeners() const { return key_listeners_.load(std::memory_order_relaxed) > 0; }
  // Whether anyone is subscribed to anything.
  bool any() const { return total_.load(std::memory_order_relaxed) > 0; }

  // The RESP2 forms of a message (RESP3 pushes differ only in the first byte).
  static std::string FormatMessage(std::string_view kind, std::string_view channel,
                                   std::string_view message);
  static std::string FormatPatternMessage(std::string_view pattern, std::string_view channel,
                                          std::string_view message);

 private:
  struct Sub {
    int worker;
    uint64_t id;
  };
  struct ClientSubs {
    int worker = 0;
    std::unordered_set<std::string> channels;
    std::vector<std::string> patterns;  // subscription order, as Redis keeps them
    std::unordered_set<std::string> shards;
  };
  using Map = std::unordered_map<std::string, std::vector<Sub>>;

  Map& MapOf(Kind k) { return k == kChannel ? channels_ : k == kPattern ? patterns_ : shards_; }
  const Map& MapOf(Kind k) const {
    return k == kChannel ? channels_ : k == kPattern ? patterns_ : shards_;
  }
  static size_t CountFor(Kind k, const ClientSubs& c) {
    return k == kShard ? c.shards.size() : c.channels.size() + c.patterns.size();
  }
  // Whether a subscription to `name` of kind `k` could receive a keyspace
  // notification.
  static bool MayHearKeyspace(Kind k, std::string_view name);
  // REQUIRES mu_ exclusive.
  void RemoveFromMap(Kind k, std::string_view name, uint64_t id);

  PushSink* sink_;
  mutable std::shared_mutex mu_;
  Map channels_, patterns_, shards_;                  // guarded by mu_
  std::unordered_map<uint64_t, ClientSubs> clients_;  // guarded by mu_
  std::atomic<int64_t> key_listeners_{0};
  std::atomic<int64_t> total_{0};
};

}  // namespace pion::server
