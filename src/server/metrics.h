// Metrics: the Prometheus text exposition (format 0.0.4) of the server's
// counters, served at GET /metrics by a net::HttpResponder on --metrics-port
// (docs/operations.md lists every metric). Built on the responder's thread
// from the same relaxed counters INFO reads: a scrape never blocks a worker.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "net/http_responder.h"

namespace pion::server {

class Server;

// The whole /metrics body.
std::string MetricsText(Server& server);

class MetricsEndpoint final : public net::HttpHandler {
 public:
  explicit MetricsEndpoint(Server* server);
  ~MetricsEndpoint() override;
  // Listens on `bind`:`port`.
  Status Start(const std::string& bind, int port);
  int port() const { return http_.port(); }
  void Stop() { http_.Stop(); }

  bool Get(std::string_view path, std::string* content_type, std::string* body) override;

 private:
  Server* server_;
  net::HttpResponder http_;
};

// The resident set size of this process in bytes (/proc/self/statm; 0 if
// unreadable), for /metrics and INFO memory.
uint64_t ResidentSetBytes();

}  // namespace pion::server
