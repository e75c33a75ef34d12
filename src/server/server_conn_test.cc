// A real Server on an ephemeral port with test commands, for what the transport
// alone (src/net/transport_test.cc) does not cover: a command that sets
// ctx.wait_lsn has its reply held until the DurabilityGate's NotifyDurable,
// released in request order (also with a deferred reply, ctx.Defer(), on
// either side of the hold), other clients not held; and a shutdown while
// background work runs finishes it and sends its reply.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/strutil.h"
#include "net/testing/socket_client.h"
#include "net/testing/ticket_box.h"
#include "server/server.h"

namespace pion::server {
namespace {

void WaitCmd(CommandContext& ctx) {
  ctx.reply->SimpleString("OK");
  ctx.wait_lsn = *ParseUint64Strict(ctx.args[1]);
}

// TEST.DEFER: takes a ticket and leaves it for the test to complete.
net::testing::TicketBox g_tickets;

void DeferCmd(CommandContext& ctx) { g_tickets.Put(ctx.Defer()); }

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
  bool ok = ctx.env->background().Post([t] {
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
    g_tickets.Clear();
    server_->RequestShutdown();
    serve_.join();
    EXPECT_EQ(rc_, 0);
  }

  int Connect() {
    int fd = net::testing::ConnectLoopback(server_->port());
    EXPECT_GE(fd, 0);
    return fd;
  }
  static void Send(int fd, const std::string& s) { ASSERT_TRUE(net::testing::SendAll(fd, s)); }
  static std::string Read(int fd, size_t n, int ms) { return net::testing::ReadFor(fd, n, ms); }

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

TEST_F(ServerFixture, DeferredReplyAndLsnHoldKeepOrder) {
  int fd = Connect();
  Send(fd, "TEST.WAIT 5\r\nTEST.DEFER\r\nPING\r\n");
  auto t = g_tickets.Take();
  ASSERT_NE(t, nullptr);
  std::thread([t] { t->Complete([](ReplyBuilder& r) { r.Error("ERR boom"); }); }).join();
  // Completed, but behind a reply that waits for LSN 5.
  EXPECT_EQ(Read(fd, 1, 100), "");
  server_->durability().NotifyDurable(5);
  EXPECT_EQ(Read(fd, 23, 5000), "+OK\r\n-ERR boom\r\n+PONG\r\n");
  // The other way round: durable first, the deferred reply still holds PING.
  Send(fd, "TEST.DEFER\r\nTEST.WAIT 7\r\nPING\r\n");
  t = g_tickets.Take();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Read(fd, 1, 100), "");
  t->SimpleString("D");
  EXPECT_EQ(Read(fd, 4, 5000), "+D\r\n");
  EXPECT_EQ(Read(fd, 1, 100), "");  // TEST.WAIT 7 ran after the completion
  server_->durability().NotifyDurable(7);
  EXPECT_EQ(Read(fd, 12, 5000), "+OK\r\n+PONG\r\n");
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
  EXPECT_TRUE(net::testing::ReadToEof(fd, 5000, &got)) << "connection not closed at shutdown";
  EXPECT_EQ(got, "+BG\r\n");
  ::close(fd);
}

}  // namespace
}  // namespace pion::server
