// Keyspace notifications (Redis 7.0's notify-keyspace-events; docs/protocol.md
// "Keyspace notifications"). Command code reports an event with
//
//   ctx.env->NotifyKeyspaceEvent(kNotifyGeneric, "del", key);
//
// (command_env.h): it returns after two relaxed loads unless the event's class is
// enabled and some subscription could hear a keyspace channel (PubSub::
// key_listeners); only then are the channels formatted and published, through
// the Pub/Sub registry, to `__keyspace@0__:<key>` (message: the event) and
// `__keyevent@0__:<event>` (message: the key) as K and E select. Callable from
// any thread (a worker's command, the expiry timer, an eviction inside the store).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pion::server {

// Redis's NOTIFY_* bits (the class letters of notify-keyspace-events).
enum NotifyClass : uint32_t {
  kNotifyKeyspace = 1u << 0,  // K
  kNotifyKeyevent = 1u << 1,  // E
  kNotifyGeneric = 1u << 2,   // g
  kNotifyString = 1u << 3,    // $
  kNotifyList = 1u << 4,      // l
  kNotifySet = 1u << 5,       // s
  kNotifyHash = 1u << 6,      // h
  kNotifyZset = 1u << 7,      // z
  kNotifyExpired = 1u << 8,   // x
  kNotifyEvicted = 1u << 9,   // e
  kNotifyStream = 1u << 10,   // t
  kNotifyKeyMiss = 1u << 11,  // m (not part of A)
  kNotifyModule = 1u << 13,   // d: pion's own types (namespaces, blocks)
  kNotifyNew = 1u << 14,      // n (not part of A)
  kNotifyAll = kNotifyGeneric | kNotifyString | kNotifyList | kNotifySet | kNotifyHash |
               kNotifyZset | kNotifyExpired | kNotifyEvicted | kNotifyStream | kNotifyModule,
};

// "KEA" -> flags; false for a character that names no class.
bool ParseNotifyFlags(std::string_view s, uint32_t* flags);
// Redis's canonical form (CONFIG GET): "A" for all of A, then K, E, m.
std::string NotifyFlagsString(uint32_t flags);

}  // namespace pion::server
