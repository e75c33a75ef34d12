// A real Server on an ephemeral port with a test command that sets
// ctx.wait_lsn: replies are held until a fake durability notifier calls
// DurabilityGate::NotifyDurable, and released in request order. Also pipelining and
// protocol-error close through the whole read/dispatch/write path. Replies
// completed later (ctx.Defer()): completed from another thread, in request
// order with the client's pipelined commands and LSN holds, after the client
// disconnected, abandoned, and across a shutdown while background work runs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/strutil.h"
#include "server/server.h"

namespace pion::server {
namespace {

void WaitCmd(CommandContext& ctx) {
  ctx.reply->SimpleString("OK");
  ctx.wait_lsn = *ParseUint64Strict(ctx.args[1]);
}

// TEST.DEFER: takes a ticket and leaves it for the test to complete.
std::mutex g_mu;
std::condition_variable g_cv;
std::deque<std::shared_ptr<DeferredReply>> g_tickets;

void DeferCmd(CommandContext& ctx) {
  std::shared_ptr<DeferredReply> t = ctx.Defer();
  std::lock_guard<std::mutex> lk(g_mu);
  g_tickets.push_back(std::move(t));
  g_cv.notify_all();
}

std::shared_ptr<DeferredReply> TakeTicket() {
  std::unique_lock<std::mutex> lk(g_mu);
  if (!g_cv.wait_for(lk, std::chrono::seconds(5), [] { return !g_tickets.empty(); }))
    return nullptr;
  auto t = std::move(g_tickets.front());
  g_tickets.pop_front();
  return t;
}

// TEST.BG: a background task that completes +BG once the test opens the gate
// (after it asked for the shutdown), so the shutdown finds it running.
struct BgGate {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool open = false;
};
BgGate g_bg;

void BgCmd(CommandContext& ctx) {
  std::shared_ptr<DeferredReply> t = ctx.Defer();
  bool ok = ctx.server->background().Post([t] {
    std::unique_lock<std::mutex> lk(g_bg.mu);
    ++g_bg.started;
    g_bg.cv.notify_all();
    g_bg.cv.wait_for(lk, std::chrono::seconds(30), [] { return g_bg.open; });
    lk.unlock();
    t->SimpleString("BG");
  });
  EXPECT_TRUE(ok);
}

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    Config cfg;
    cfg.port = 0;
    cfg.workers = 2;
    server_ = std::make_unique<Server>(
        cfg, std::vector<CommandSpec>{{"TEST.WAIT", 2, kCmdWrite, 0, 0, 0, WaitCmd, "test"},
                                      {"TEST.DEFER", 1, 0, 0, 0, 0, DeferCmd, "test"},
                                      {"TEST.BG", 1, 0, 0, 0, 0, BgCmd, "test"}});
    ASSERT_TRUE(server_->Start().ok());
    serve_ = std::thread([this] { rc_ = server_->Serve(-1); });
  }
  void TearDown() override {
    {
      std::lock_guard<std::mutex> lk(g_mu);
      g_tickets.clear();
    }
    server_->RequestShutdown();
    serve_.join();
    EXPECT_EQ(rc_, 0);
  }

  int Connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }
  static void Send(int fd, const std::string& s) {
    ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  // Reads until `n` bytes arrived or `ms` passed (a deadline, not a sleep).
  static std::string Read(int fd, size_t n, int ms) {
    std::string out;
    uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(ms) * 1000000;
    while (out.size() < n) {
      uint64_t now = MonotonicNs();
      if (now >= deadline) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>((deadline - now) / 1000000) + 1) <= 0) continue;
      char buf[65536];
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // Reads until the peer's orderly close (read() == 0) or `ms` passed; true only for
  // the close, so a server that keeps the connection open fails the caller.
  static bool ReadToEof(int fd, int ms, std::string* out) {
    uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(ms) * 1000000;
    while (true) {
      uint64_t now = MonotonicNs();
      if (now >= deadline) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>((deadline - now) / 1000000) + 1) <= 0) continue;
      char buf[65536];
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r == 0) return true;
      if (r < 0) return false;
      out->append(buf, static_cast<size_t>(r));
    }
  }

  std::unique_ptr<Server> server_;
  std::thread serve_;
  int rc_ = -1;
};

TEST_F(ServerFixture, DeferredRepliesWaitForDurableLsn) {
  int fd = Connect();
  Send(fd, "PING\r\nTEST.WAIT 5\r\nPING\r\n");
  EXPECT_EQ(Read(fd, 7, 5000), "+PONG\r\n");
  // Held: nothing more arrives while the LSN is not durable.
  EXPECT_EQ(Read(fd, 1, 100), "");
  server_->durability().NotifyDurable(4);
  EXPECT_EQ(Read(fd, 1, 100), "");
  server_->durability().NotifyDurable(5);
  EXPECT_EQ(Read(fd, 12, 5000), "+OK\r\n+PONG\r\n");
  // Already durable: not held.
  Send(fd, "TEST.WAIT 3\r\n");
  EXPECT_EQ(Read(fd, 5, 5000), "+OK\r\n");
  ::close(fd);
}

TEST_F(ServerFixture, OtherClientsAreNotHeld) {
  int a = Connect(), b = Connect();
  Send(a, "TEST.WAIT 100\r\n");
  Send(b, "PING\r\n");
  EXPECT_EQ(Read(b, 7, 5000), "+PONG\r\n");
  EXPECT_EQ(Read(a, 1, 50), "");
  server_->durability().NotifyDurable(100);
  EXPECT_EQ(Read(a, 5, 5000), "+OK\r\n");
  ::close(a);
  ::close(b);
}

TEST_F(ServerFixture, PipelineInOrder) {
  int fd = Connect();
  std::string in, expect;
  for (int i = 0; i < 5000; ++i) {
    std::string v = std::to_string(i);
    in += "*2\r\n$4\r\nECHO\r\n$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
    expect += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  }
  Send(fd, in);
  EXPECT_EQ(Read(fd, expect.size(), 10000), expect);
  ::close(fd);
}

TEST_F(ServerFixture, ProtocolErrorRepliesThenCloses) {
  int fd = Connect();
  Send(fd, "PING\r\n*1\r\nfoo\r\nPING\r\n");
  std::string want = "+PONG\r\n-ERR Protocol error: expected '$', got 'f'\r\n";
  std::string got;
  EXPECT_TRUE(ReadToEof(fd, 5000, &got)) << "connection not closed after the error";
  EXPECT_EQ(got, want);
  ::close(fd);
}

TEST_F(ServerFixture, DeferredReplyCompletedFromAnotherThreadInOrder) {
  int fd = Connect();
  Send(fd, "PING\r\nTEST.DEFER\r\nPING\r\nECHO x\r\n");
  EXPECT_EQ(Read(fd, 7, 5000), "+PONG\r\n");
  auto t = TakeTicket();
  ASSERT_NE(t, nullptr);
  // Held: the later PING and ECHO wait behind the pending reply.
  EXPECT_EQ(Read(fd, 1, 100), "");
  std::thread([t] { t->SimpleString("DONE"); }).join();
  t->SimpleString("again");  // ignored: the first completion wins
  EXPECT_EQ(Read(fd, 21, 5000), "+DONE\r\n+PONG\r\n$1\r\nx\r\n");
  // The connection is usable afterwards.
  Send(fd, "PING\r\n");
  EXPECT_EQ(Read(fd, 7, 5000), "+PONG\r\n");
  ::close(fd);
}

TEST_F(ServerFixture, DeferredReplyAndLsnHoldKeepOrder) {
  int fd = Connect();
  Send(fd, "TEST.WAIT 5\r\nTEST.DEFER\r\nPING\r\n");
  auto t = TakeTicket();
  ASSERT_NE(t, nullptr);
  std::thread([t] { t->Complete([](ReplyBuilder& r) { r.Error("ERR boom"); }); }).join();
  // Completed, but behind a reply that waits for LSN 5.
  EXPECT_EQ(Read(fd, 1, 100), "");
  server_->durability().NotifyDurable(5);
  EXPECT_EQ(Read(fd, 23, 5000), "+OK\r\n-ERR boom\r\n+PONG\r\n");
  // The other way round: durable first, the deferred reply still holds PING.
  Send(fd, "TEST.DEFER\r\nTEST.WAIT 7\r\nPING\r\n");
  t = TakeTicket();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Read(fd, 1, 100), "");
  t->SimpleString("D");
  EXPECT_EQ(Read(fd, 4, 5000), "+D\r\n");
  EXPECT_EQ(Read(fd, 1, 100), "");  // TEST.WAIT 7 ran after the completion
  server_->durability().NotifyDurable(7);
  EXPECT_EQ(Read(fd, 12, 5000), "+OK\r\n+PONG\r\n");
  ::close(fd);
}

TEST_F(ServerFixture, DeferredReplyAfterClientDisconnected) {
  int fd = Connect();
  Send(fd, "TEST.DEFER\r\n");
  auto t = TakeTicket();
  ASSERT_NE(t, nullptr);
  // Reset the connection: the server frees it while the ticket is pending.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  ::close(fd);
  uint64_t deadline = MonotonicNs() + 5000000000ull;
  while (server_->clients().connected() != 0 && MonotonicNs() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server_->clients().connected(), 0u);
  std::thread([t] { t->SimpleString("LATE"); }).join();
  // The completion found no connection; the server carries on.
  int b = Connect();
  Send(b, "PING\r\n");
  EXPECT_EQ(Read(b, 7, 5000), "+PONG\r\n");
  ::close(b);
}

TEST_F(ServerFixture, AbandonedTicketRepliesWithAnError) {
  int fd = Connect();
  Send(fd, "TEST.DEFER\r\nPING\r\n");
  auto t = TakeTicket();
  ASSERT_NE(t, nullptr);
  t.reset();  // destroyed without a completion
  std::string want = "-ERR internal error: deferred reply abandoned\r\n+PONG\r\n";
  EXPECT_EQ(Read(fd, want.size(), 5000), want);
  ::close(fd);
}

TEST_F(ServerFixture, ShutdownFinishesBackgroundWorkAndSendsItsReply) {
  int fd = Connect();
  int before;
  {
    std::lock_guard<std::mutex> lk(g_bg.mu);
    before = g_bg.started;
    g_bg.open = false;
  }
  Send(fd, "TEST.BG\r\n");
  {
    std::unique_lock<std::mutex> lk(g_bg.mu);
    ASSERT_TRUE(
        g_bg.cv.wait_for(lk, std::chrono::seconds(5), [&] { return g_bg.started > before; }));
  }
  server_->RequestShutdown();
  // Let the task finish only once the shutdown has begun.
  uint64_t deadline = MonotonicNs() + 5000000000ull;
  while (!server_->shutting_down() && MonotonicNs() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(server_->shutting_down());
  {
    std::lock_guard<std::mutex> lk(g_bg.mu);
    g_bg.open = true;
  }
  g_bg.cv.notify_all();
  // The reply, then the close of a server that finished its work.
  std::string got;
  EXPECT_TRUE(ReadToEof(fd, 5000, &got)) << "connection not closed at shutdown";
  EXPECT_EQ(got, "+BG\r\n");
  ::close(fd);
}

}  // namespace
}  // namespace pion::server
