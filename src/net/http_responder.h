// HttpResponder: a tiny HTTP/1.x server for GET requests (Prometheus'
// /metrics). It knows no data: each request's body comes from an HttpHandler
// the owner supplies. It runs its own thread and event loop, so a slow or
// stuck scraper never delays a worker, and it bounds what a peer can cost:
// a request head of at most max_request_bytes (431 beyond), at most
// max_connections open at once (further ones are closed at accept), and
// timeout_ms for the whole exchange. One request per connection
// (`Connection: close`); methods other than GET and HEAD get 405.
//
// Thread-safety: Start and Stop from one thread; the handler is called on the
// responder's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/status.h"
#include "net/event_loop.h"

namespace pion::net {

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Fills the reply for GET `path` (the query string stripped); false: 404.
  virtual bool Get(std::string_view path, std::string* content_type, std::string* body) = 0;
};

class HttpResponder {
 public:
  struct Options {
    size_t max_request_bytes = 8192;
    int max_connections = 16;
    uint64_t timeout_ms = 10000;
  };

  HttpResponder(HttpHandler* handler, Options opts);
  ~HttpResponder();  // Stop()
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;

  // Listens on bind:port (0: any free port, see port()) and starts the thread.
  Status Start(const std::string& bind, int port);
  int port() const { return port_; }
  void Stop();

 private:
  struct Conn {
    int fd = -1;
    std::string in;
    std::string out;
    size_t sent = 0;
    bool responded = false;
    uint64_t timer = 0;
  };
  void OnAccept();
  void OnEvent(int fd, uint32_t events);
  void Respond(Conn& c);
  void Reply(Conn& c, int status, const char* reason, std::string_view type, std::string body,
             bool head);
  void Write(Conn& c);
  void CloseConn(int fd);

  HttpHandler* handler_;
  Options opts_;
  EventLoop loop_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // loop thread only
};

}  // namespace pion::net
