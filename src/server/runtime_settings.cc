#include "server/runtime_settings.h"

namespace pion::server {

uint64_t EffectiveClientsMemory(const Config& c) {
  uint64_t limit = c.maxmemory_clients;
  // A percentage of maxmemory; none while maxmemory is 0 (as Redis).
  if (c.maxmemory_clients_percent > 0)
    limit = c.maxmemory > 0
                ? static_cast<uint64_t>(static_cast<double>(c.maxmemory) *
                                        static_cast<double>(c.maxmemory_clients_percent) / 100.0)
                : 0;
  // As Redis: never so small that no client could be served at all.
  constexpr uint64_t kFloor = 128 * 1024;
  if (limit > 0 && limit < kFloor) limit = kFloor;
  return limit;
}

void RuntimeSettings::Publish(const Config& c) {
  maxclients_.store(c.maxclients, kR);
  timeout_s_.store(c.timeout, kR);
  output_limit_.store(c.client_output_buffer_limit, kR);
  output_soft_limit_.store(c.client_output_buffer_soft_limit, kR);
  output_soft_seconds_.store(c.client_output_buffer_soft_seconds, kR);
  ps_output_limit_.store(c.pubsub_output_buffer_limit, kR);
  ps_output_soft_limit_.store(c.pubsub_output_buffer_soft_limit, kR);
  ps_output_soft_seconds_.store(c.pubsub_output_buffer_soft_seconds, kR);
  query_buffer_limit_.store(c.client_query_buffer_limit, kR);
  maxmemory_.store(c.maxmemory, kR);
  maxmemory_clients_.store(EffectiveClientsMemory(c), kR);
}

}  // namespace pion::server
