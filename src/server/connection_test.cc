// A real Server on an ephemeral port with a test command that sets
// ctx.wait_lsn: replies are held until a fake durability notifier calls
// Server::NotifyDurable, and released in request order. Also pipelining and
// protocol-error close through the whole read/dispatch/write path.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    Config cfg;
    cfg.port = 0;
    cfg.workers = 2;
    server_ = std::make_unique<Server>(
        cfg, std::vector<CommandSpec>{{"TEST.WAIT", 2, kCmdWrite, 0, 0, 0, WaitCmd, "test"}});
    ASSERT_TRUE(server_->Start().ok());
    serve_ = std::thread([this] { rc_ = server_->Serve(-1); });
  }
  void TearDown() override {
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
  server_->NotifyDurable(4);
  EXPECT_EQ(Read(fd, 1, 100), "");
  server_->NotifyDurable(5);
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
  server_->NotifyDurable(100);
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
  EXPECT_EQ(Read(fd, want.size() + 1, 5000), want);  // then EOF
  ::close(fd);
}

}  // namespace
}  // namespace pion::server
