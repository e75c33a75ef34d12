// The transport alone: Connection over real loopback sockets, run by a
// one-thread test host (a ConnHost: an EventLoop, a listener, the connections)
// against a small test Service (PING, ECHO, TEST.DEFER), with no server, store
// or command table. Pipelining in order, a protocol error answered then
// closed, and replies completed later (DeferredReply): from another thread in
// request order with the client's pipelined commands, after the client
// disconnected, and abandoned. Held replies (the durable LSN) and shutdown are
// the server's (src/server/server_conn_test.cc).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "net/connection.h"
#include "net/listener.h"
#include "net/service.h"
#include "net/testing/socket_client.h"
#include "net/testing/ticket_box.h"

namespace pion::net {
namespace {

using testing::ReadFor;
using testing::ReadToEof;
using testing::SendAll;

// PING, ECHO <x>, and TEST.DEFER (a ticket left in `tickets`); nothing is ever
// held (no LSNs), no limits.
class TestService final : public Service {
 public:
  uint64_t Dispatch(std::span<const std::string_view> args, ReplyBuilder& reply,
                    ConnContext& ctx) override {
    if (args[0] == "PING") {
      reply.SimpleString("PONG");
    } else if (args[0] == "ECHO" && args.size() == 2) {
      reply.Bulk(args[1]);
    } else if (args[0] == "TEST.DEFER") {
      tickets.Put(ctx.conn->BeginDeferred());
    } else {
      reply.Error("ERR unknown command");
    }
    return 0;
  }
  uint64_t DispatchFrame(const Frame&, ReplyBuilder& reply, ConnContext&) override {
    reply.Error("ERR no frames here");
    return 0;
  }
  uint64_t durable_lsn() const override { return 0; }
  ParserLimits parser_limits() const override { return {}; }
  bool auth_required() const override { return false; }
  uint64_t query_buffer_limit() const override { return 1ull << 30; }
  uint64_t output_limit() const override { return 0; }
  uint64_t output_soft_limit() const override { return 0; }
  uint64_t output_soft_seconds() const override { return 0; }
  uint64_t output_check_threshold() const override { return UINT64_MAX; }
  bool ReserveClientMemory(uint64_t, const ClientInfo*) override { return true; }
  void AdjustClientMemory(int64_t) override {}
  void OnOpen(ClientInfo*) override { open.fetch_add(1); }
  void OnClose(ClientInfo*) override { open.fetch_sub(1); }

  std::atomic<int> open{0};  // connections open now
  testing::TicketBox tickets;
};

// One event-loop thread that accepts on a loopback listener and owns the
// connections, as a server's worker does.
class TestHost final : public ConnHost {
 public:
  explicit TestHost(Service* service) : service_(service), pool_(16u << 20) {}
  ~TestHost() { Stop(); }

  void Start() {
    ASSERT_TRUE(loop_.Init().ok());
    Result<int> fd = Listen("127.0.0.1", 0);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    listen_fd_ = *fd;
    port_ = BoundPort(listen_fd_);
    ASSERT_TRUE(loop_.Add(listen_fd_, EPOLLIN, [this](uint32_t) { Accept(); }).ok());
    thread_ = std::thread([this] {
      loop_.Run();
      for (auto& [id, c] : conns_)
        if (!c->closed()) c->Close("test exit");
      conns_.clear();
    });
  }
  void Stop() {
    if (thread_.joinable()) {
      loop_.Stop();
      thread_.join();
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }
  int port() const { return port_; }

  int index() const override { return 0; }
  EventLoop& loop() override { return loop_; }
  BufferPool& pool() override { return pool_; }
  ConnStats& stats() override { return stats_; }
  void Release(Connection* c) override {
    uint64_t id = c->id();
    loop_.Defer([this, id] { conns_.erase(id); });
  }
  void WaitDurable(Connection*, uint64_t lsn) override {
    ADD_FAILURE() << "the test service holds nothing, yet a reply waits for LSN " << lsn;
  }
  void CompleteDeferred(uint64_t client_id, uint64_t slot, DeferredReply::WriteFn fn) override {
    loop_.Post([this, client_id, slot, fn = std::move(fn)] {
      auto it = conns_.find(client_id);
      if (it != conns_.end()) it->second->FinishDeferred(slot, fn);
    });
  }

 private:
  void Accept() {
    while (true) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      uint64_t id = ++next_id_;
      auto conn = std::make_unique<Connection>(this, service_, fd, id, "test", "test");
      Connection* c = conn.get();
      conns_.emplace(id, std::move(conn));
      if (c->Start()) c->OnEvent(EPOLLIN);
    }
  }

  Service* service_;
  EventLoop loop_;
  BufferPool pool_;
  ConnStats stats_;
  int listen_fd_ = -1;
  int port_ = 0;
  uint64_t next_id_ = 0;
  std::thread thread_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;  // loop thread
};

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.Start(); }
  void TearDown() override {
    service_.tickets.Clear();  // completes them while the host still runs
    host_.Stop();
  }
  int Connect() {
    int fd = testing::ConnectLoopback(host_.port());
    EXPECT_GE(fd, 0);
    return fd;
  }

  TestService service_;
  TestHost host_{&service_};
};

TEST_F(TransportTest, PipelineInOrder) {
  int fd = Connect();
  std::string in, expect;
  for (int i = 0; i < 5000; ++i) {
    std::string v = std::to_string(i);
    in += "*2\r\n$4\r\nECHO\r\n$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
    expect += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  }
  ASSERT_TRUE(SendAll(fd, in));
  EXPECT_EQ(ReadFor(fd, expect.size(), 10000), expect);
  ::close(fd);
}

TEST_F(TransportTest, ProtocolErrorRepliesThenCloses) {
  int fd = Connect();
  ASSERT_TRUE(SendAll(fd, "PING\r\n*1\r\nfoo\r\nPING\r\n"));
  std::string want = "+PONG\r\n-ERR Protocol error: expected '$', got 'f'\r\n";
  std::string got;
  EXPECT_TRUE(ReadToEof(fd, 5000, &got)) << "connection not closed after the error";
  EXPECT_EQ(got, want);
  ::close(fd);
}

TEST_F(TransportTest, DeferredReplyCompletedFromAnotherThreadInOrder) {
  int fd = Connect();
  ASSERT_TRUE(SendAll(fd, "PING\r\nTEST.DEFER\r\nPING\r\nECHO x\r\n"));
  EXPECT_EQ(ReadFor(fd, 7, 5000), "+PONG\r\n");
  auto t = service_.tickets.Take();
  ASSERT_NE(t, nullptr);
  // Held: the later PING and ECHO wait behind the pending reply.
  EXPECT_EQ(ReadFor(fd, 1, 100), "");
  std::thread([t] { t->SimpleString("DONE"); }).join();
  t->SimpleString("again");  // ignored: the first completion wins
  EXPECT_EQ(ReadFor(fd, 21, 5000), "+DONE\r\n+PONG\r\n$1\r\nx\r\n");
  // The connection is usable afterwards.
  ASSERT_TRUE(SendAll(fd, "PING\r\n"));
  EXPECT_EQ(ReadFor(fd, 7, 5000), "+PONG\r\n");
  ::close(fd);
}

TEST_F(TransportTest, DeferredReplyAfterClientDisconnected) {
  int fd = Connect();
  ASSERT_TRUE(SendAll(fd, "TEST.DEFER\r\n"));
  auto t = service_.tickets.Take();
  ASSERT_NE(t, nullptr);
  // Reset the connection: the host frees it while the ticket is pending.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  ::close(fd);
  uint64_t deadline = MonotonicNs() + 5000000000ull;
  while (service_.open.load() != 0 && MonotonicNs() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(service_.open.load(), 0);
  std::thread([t] { t->SimpleString("LATE"); }).join();
  // The completion found no connection; the host carries on.
  int b = Connect();
  ASSERT_TRUE(SendAll(b, "PING\r\n"));
  EXPECT_EQ(ReadFor(b, 7, 5000), "+PONG\r\n");
  ::close(b);
}

TEST_F(TransportTest, AbandonedTicketRepliesWithAnError) {
  int fd = Connect();
  ASSERT_TRUE(SendAll(fd, "TEST.DEFER\r\nPING\r\n"));
  auto t = service_.tickets.Take();
  ASSERT_NE(t, nullptr);
  t.reset();  // destroyed without a completion
  std::string want = "-ERR internal error: deferred reply abandoned\r\n+PONG\r\n";
  EXPECT_EQ(ReadFor(fd, want.size(), 5000), want);
  ::close(fd);
}

}  // namespace
}  // namespace pion::net
