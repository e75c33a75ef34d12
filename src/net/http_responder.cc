#include "net/http_responder.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "net/listener.h"

namespace pion::net {

HttpResponder::HttpResponder(HttpHandler* handler, Options opts) : handler_(handler), opts_(opts) {}

HttpResponder::~HttpResponder() { Stop(); }

Status HttpResponder::Start(const std::string& bind, int port) {
  PION_RETURN_IF_ERROR(loop_.Init());
  auto fd = Listen(bind, port);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  port_ = BoundPort(listen_fd_);
  PION_RETURN_IF_ERROR(loop_.Add(listen_fd_, EPOLLIN, [this](uint32_t) { OnAccept(); }));
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "pion-metrics");
    loop_.Run();
    for (auto& [cfd, conn] : conns_) ::close(cfd);
    conns_.clear();
  });
  return Status::OK();
}

void HttpResponder::Stop() {
  if (thread_.joinable()) {
    loop_.Stop();
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void HttpResponder::OnAccept() {
  for (int i = 0; i < 16; ++i) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        LOG_VERBOSE("metrics accept: %s", std::strerror(errno));
      return;
    }
    if (static_cast<int>(conns_.size()) >= opts_.max_connections) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    Status st = loop_.Add(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                          [this, fd](uint32_t ev) { OnEvent(fd, ev); });
    if (!st.ok()) {
      ::close(fd);
      continue;
    }
    c->timer = loop_.AddTimer(opts_.timeout_ms, false, [this, fd] {
      auto it = conns_.find(fd);
      if (it != conns_.end()) {
        it->second->timer = 0;
        CloseConn(fd);
      }
    });
    conns_[fd] = std::move(c);
  }
}

void HttpResponder::OnEvent(int fd, uint32_t events) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (!c.responded && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    char buf[4096];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() > opts_.max_request_bytes)
          break;
        continue;
      }
      if (n == 0) {  // the peer closed before a whole request
        if (c.in.find("\r\n\r\n") == std::string::npos) {
          CloseConn(fd);
          return;
        }
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseConn(fd);
      return;
    }
    if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() > opts_.max_request_bytes)
      Respond(c);
  }
  if (c.responded) Write(c);
}

void HttpResponder::Respond(Conn& c) {
  c.responded = true;
  size_t head_end = c.in.find("\r\n\r\n");
  if (head_end == std::string::npos || head_end > opts_.max_request_bytes) {
    Reply(c, 431, "Request Header Fields Too Large", "text/plain", "request too large\n", false);
    return;
  }
  std::string_view line(c.in.data(), c.in.find("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.")) {
    Reply(c, 400, "Bad Request", "text/plain", "bad request\n", false);
    return;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Reply(c, 405, "Method Not Allowed", "text/plain", "only GET\n", false);
    return;
  }
  size_t q = target.find('?');
  if (q != std::string_view::npos) target = target.substr(0, q);
  std::string type, body;
  if (!handler_->Get(target, &type, &body)) {
    Reply(c, 404, "Not Found", "text/plain", "not found\n", head);
    return;
  }
  Reply(c, 200, "OK", type, std::move(body), head);
}

void HttpResponder::Reply(Conn& c, int status, const char* reason, std::string_view type,
                          std::string body, bool head) {
  c.responded = true;
  c.out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: ";
  c.out.append(type);
  c.out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) c.out += body;
  c.in.clear();
  c.in.shrink_to_fit();
}

void HttpResponder::Write(Conn& c) {
  while (c.sent < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT follows
    break;
  }
  CloseConn(c.fd);
}

void HttpResponder::CloseConn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second->timer != 0) loop_.CancelTimer(it->second->timer);
  loop_.Remove(fd);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
  conns_.erase(it);
}

}  // namespace pion::net
