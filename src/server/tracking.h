// Tracking: the server side of client-side caching (Redis 7.0's CLIENT
// TRACKING; docs/protocol.md "Client-side caching").
//
// Default mode: the keys a tracking client reads (every kCmdReadonly command's
// key arguments) go into one table, key -> ids of the clients that read it.
// When a key is modified (a write command's non-read-only keys, an expiry, an
// eviction) each client that read it is sent one invalidation and the key is
// forgotten. The table holds at most `tracking-table-max-keys` keys: past
// that, keys picked at random are invalidated (as if modified) and dropped.
// BCAST mode: a client subscribes to key prefixes (none: every key); every
// modified key that starts with one is sent to it, whether it read it or not.
// FLUSHALL / FLUSHDB send every tracking client a null invalidation.
//
// Delivery (Send): an invalidation goes to the tracking client itself when it
// speaks RESP3 (a push `>2 invalidate [keys]`), or to the client it redirects
// to: as a RESP3 push, or as a Pub/Sub message on `__redis__:invalidate` when
// that client speaks RESP2 and is subscribed to something. A redirect to a
// client that is gone marks the tracking client (CLIENT LIST flag R,
// TRACKINGINFO broken_redirect) and a RESP3 one gets `tracking-redir-broken`.
// Messages are formatted here and handed to the receiver's worker through the
// same PushSink as Pub/Sub (Worker::DeliverPush), so the writer and the reader
// may be on different workers and no thread touches another's connection. A
// writer's own invalidation goes through its worker's mailbox too, so it
// follows the reply of the command that caused it.
//
// Per-client flags live in ClientInfo::tracking (TrackingFlag bits) and the
// redirect in ClientInfo::tracking_redir: the owning worker writes them, any
// thread may read them or add kTrackBrokenRedir.
//
// Thread-safety: every method may be called from any thread. mu_ guards the
// tables; no other lock is taken while it is held (Send runs after it is
// released and takes the client registry's lock, then the receiver's mailbox).
// Callers may hold the store's locks (expiry and eviction callbacks).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "net/client_info.h"

namespace pion::server {

class ClientRegistry;
class PushSink;

// ClientInfo::tracking bits (Redis's CLIENT_TRACKING_* flags).
enum TrackingFlag : uint32_t {
  kTrackOn = 1u << 0,
  kTrackBcast = 1u << 1,
  kTrackOptin = 1u << 2,
  kTrackOptout = 1u << 3,
  kTrackCaching = 1u << 4,  // CLIENT CACHING yes (OPTIN) / no (OPTOUT) for the next command
  kTrackNoloop = 1u << 5,
  kTrackBrokenRedir = 1u << 6,
};

class Tracking {
 public:
  Tracking(ClientRegistry* clients, PushSink* sink) : clients_(clients), sink_(sink) {}

  // Whether a command may have tracking work: a client tracks, or keys are
  // still remembered (one relaxed load each).
  bool armed() const {
    return tracking_clients_.load(std::memory_order_relaxed) > 0 ||
           total_keys_.load(std::memory_order_relaxed) > 0;
  }

  // CLIENT TRACKING ON checks (before Enable): whether one of `prefixes`
  // overlaps one the client already has (kExisting: *a the new one, *b the
  // old one) or another one given (kProvided: *a, *b the two given).
  enum class Overlap { kNone, kExisting, kProvided };
  Overlap CheckPrefixes(uint64_t id, std::span<const std::string_view> prefixes, std::string* a,
                        std::string* b) const EXCLUDES(mu_);
  // CLIENT TRACKING ON (on the client's worker): `options` are kTrackBcast,
  // kTrackOptin, kTrackOptout, kTrackNoloop bits; with kTrackBcast the client
  // subscribes to `prefixes` (none: the empty prefix, every key).
  void Enable(net::ClientInfo* c, uint64_t redirect, uint32_t options,
              std::span<const std::string_view> prefixes) EXCLUDES(mu_);
  // CLIENT TRACKING OFF, RESET, close.
  void Disable(net::ClientInfo* c) EXCLUDES(mu_);
  // The client's BCAST prefixes, in byte order (TRACKINGINFO).
  std::vector<std::string> Prefixes(uint64_t id) const EXCLUDES(mu_);

  // After a read-only command of client `c` ran: remembers `keys` for it
  // (default mode, unless OPTIN without CACHING yes or OPTOUT with CACHING no).
  void RememberKeys(const net::ClientInfo& c, std::span<const std::string_view> keys) EXCLUDES(mu_);
  // `key` was modified by client `writer` (0: no client: expiry, eviction).
  // Default-mode readers are sent the key at once; for BCAST subscribers the
  // key waits, on this thread, until the running command ends (EndCommand),
  // so that a command or transaction modifying several keys sends one array
  // per prefix and client, as Redis sends one per event-loop turn. Outside a
  // command (active expiry, eviction by another thread) it is sent at once.
  void InvalidateKey(std::string_view key, uint64_t writer) EXCLUDES(mu_);
  // Around a client's command (CommandService::Dispatch): BeginCommand marks
  // the thread, EndCommand sends the BCAST keys it gathered.
  static void BeginCommand();
  void EndCommand() EXCLUDES(mu_);
  // FLUSHALL / FLUSHDB: a null invalidation to every tracking client; the
  // table is emptied.
  void InvalidateAll() EXCLUDES(mu_);

  // tracking-table-max-keys (0: no bound): a lower bound applies at once
  // (keys picked at random are invalidated until the table fits).
  void SetMaxKeys(uint64_t n) EXCLUDES(mu_);

  // INFO: tracking_clients, tracking_total_keys, tracking_total_items,
  // tracking_total_prefixes.
  uint64_t clients() const { return tracking_clients_.load(std::memory_order_relaxed); }
  uint64_t total_keys() const { return total_keys_.load(std::memory_order_relaxed); }
  uint64_t total_items() const EXCLUDES(mu_);
  uint64_t total_prefixes() const EXCLUDES(mu_);

  // What one BCAST prefix is charged to its client's memory (ClientInfo::
  // service_mem, client eviction).
  static uint64_t PrefixCost(size_t len) { return len + 64; }

 private:
  // One message for one client: a key read in default mode, a key under one
  // of its BCAST prefixes, or FLUSHALL's null.
  enum class Kind { kKey, kBcast, kNull };
  struct Outgoing {
    uint64_t id;
    std::string keys;  // "*1\r\n$..." (empty for kNull)
    Kind kind;
    uint64_t writer;  // the client that modified the key (NOLOOP); 0: none
  };
  // The RESP array of one key.
  static std::string KeyArray(std::string_view key);
  // Formats and hands one invalidation to its receiver (no lock held).
  void Send(const Outgoing& o) EXCLUDES(mu_);
  // Drops `key` from the table, adding its readers to `out` (skipping the
  // writer when it is in NOLOOP mode, and clients no longer in default mode).
  void TakeKeyLocked(std::string_view key, uint64_t writer, std::vector<Outgoing>* out)
      REQUIRES(mu_);
  // Sends BCAST invalidations for `keys` (key, writer): one array per prefix
  // and subscriber, without the keys a NOLOOP subscriber wrote itself.
  void SendBcast(const std::vector<std::pair<std::string, uint64_t>>& keys) EXCLUDES(mu_);
  // Over max_keys_: invalidates keys picked at random until under it again.
  // At most `effort` keys (0: as many as it takes).
  void LimitKeysLocked(std::vector<Outgoing>* out, int effort) REQUIRES(mu_);

  ClientRegistry* clients_;
  PushSink* sink_;
  std::atomic<uint64_t> max_keys_{1000000};
  std::atomic<uint64_t> tracking_clients_{0};
  std::atomic<uint64_t> total_keys_{0};

  mutable base::Mutex mu_;
  // Default mode: key -> the ids of the clients that read it.
  std::unordered_map<std::string, std::unordered_set<uint64_t>> table_ GUARDED_BY(mu_);
  uint64_t total_items_ GUARDED_BY(mu_) = 0;
  // BCAST: prefix -> subscribed client ids, and each client's prefixes.
  std::map<std::string, std::set<uint64_t>, std::less<>> prefix_table_ GUARDED_BY(mu_);
  struct BcastClient {
    std::set<std::string, std::less<>> prefixes;
    bool noloop = false;
  };
  std::unordered_map<uint64_t, BcastClient> client_prefixes_ GUARDED_BY(mu_);
  uint64_t random_state_ GUARDED_BY(mu_) = 0x9e3779b97f4a7c15ull;
};

}  // namespace pion::server
