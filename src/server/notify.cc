#include "server/notify.h"

#include "server/server.h"

namespace pion::server {

bool ParseNotifyFlags(std::string_view s, uint32_t* flags) {
  uint32_t f = 0;
  for (char c : s) {
    switch (c) {
      case 'A':
        f |= kNotifyAll;
        break;
      case 'g':
        f |= kNotifyGeneric;
        break;
      case '$':
        f |= kNotifyString;
        break;
      case 'l':
        f |= kNotifyList;
        break;
      case 's':
        f |= kNotifySet;
        break;
      case 'h':
        f |= kNotifyHash;
        break;
      case 'z':
        f |= kNotifyZset;
        break;
      case 'x':
        f |= kNotifyExpired;
        break;
      case 'e':
        f |= kNotifyEvicted;
        break;
      case 'K':
        f |= kNotifyKeyspace;
        break;
      case 'E':
        f |= kNotifyKeyevent;
        break;
      case 't':
        f |= kNotifyStream;
        break;
      case 'm':
        f |= kNotifyKeyMiss;
        break;
      case 'd':
        f |= kNotifyModule;
        break;
      case 'n':
        f |= kNotifyNew;
        break;
      default:
        return false;
    }
  }
  *flags = f;
  return true;
}

std::string NotifyFlagsString(uint32_t f) {
  std::string s;
  if ((f & kNotifyAll) == kNotifyAll) {
    s += 'A';
  } else {
    static constexpr struct {
      uint32_t bit;
      char c;
    } kOrder[] = {{kNotifyGeneric, 'g'}, {kNotifyString, '$'},  {kNotifyList, 'l'},
                  {kNotifySet, 's'},     {kNotifyHash, 'h'},    {kNotifyZset, 'z'},
                  {kNotifyExpired, 'x'}, {kNotifyEvicted, 'e'}, {kNotifyStream, 't'},
                  {kNotifyModule, 'd'},  {kNotifyNew, 'n'}};
    for (const auto& o : kOrder)
      if (f & o.bit) s += o.c;
  }
  if (f & kNotifyKeyspace) s += 'K';
  if (f & kNotifyKeyevent) s += 'E';
  if (f & kNotifyKeyMiss) s += 'm';
  return s;
}

void Server::NotifyKeyspaceEventSlow(uint32_t flags, std::string_view event, std::string_view key) {
  if (flags & kNotifyKeyspace) {
    std::string chan = "__keyspace@0__:";
    chan.append(key);
    pubsub_.Publish(false, chan, event);
  }
  if (flags & kNotifyKeyevent) {
    std::string chan = "__keyevent@0__:";
    chan.append(event);
    pubsub_.Publish(false, chan, key);
  }
}

}  // namespace pion::server
