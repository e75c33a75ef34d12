// CommandTest: runs commands against the server's net::Service in process,
// without sockets or worker threads, and decodes each reply as a client would
// read it (the real RespWriter encodes it; RespValue decodes it).
//
//   class PingTest : public CommandTest {};
//   TEST_F(PingTest, Pong) { EXPECT_EQ(Run({"PING"}), "PONG"); }
//
// Each test gets a fresh Server (no listener, no workers); a fixture that
// needs settings passes a Config (KvTest below enables --kvcache). Commands
// run as client 0 unless SwitchClient(n) picks another (created on first use,
// registered like a connection). A command that defers its reply (SAVE,
// COMMIT) is waited for, with a deadline, on the server's background runner.
// What needs a real connection (pipelining, held replies, output limits,
// closing) stays in src/server/server_conn_test.cc and the pytest suites.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "net/client_control.h"
#include "net/resp_writer.h"
#include "net/service.h"
#include "server/commands/testing/resp_value.h"
#include "server/config.h"
#include "server/server.h"

namespace pion::server::testing {

// A client without a socket: the state a handler may change (ClientControl),
// registered with the server's client registry while it exists.
class FakeClient final : public net::ClientControl, public net::ConnHost {
 public:
  FakeClient(Server* server, uint64_t id);
  ~FakeClient();

  net::ClientInfo& info() { return info_; }
  bool close_requested() const { return close_after_reply_; }
  bool reading_stopped() const { return stopped_reading_; }

  // ClientControl.
  int proto() const override { return proto_; }
  void SetProto(int p) override;
  bool authenticated() const override { return authenticated_; }
  void SetAuthenticated(bool v) override;
  void CloseAfterReply() override { close_after_reply_ = true; }
  void StopReading() override { stopped_reading_ = true; }
  bool ReserveMemory(size_t n) override;
  std::shared_ptr<net::DeferredReply> BeginDeferred() override;
  // Records the mode only (the fixture returns every reply it was given).
  void SetReplyMode(net::ReplyMode m) override { reply_mode_ = m; }
  // The client's output limit as a long reply grows: over from the `n`th
  // check on (0: never over; set_reply_over_limit_from also resets the count).
  bool ReplyOverOutputLimit() override {
    ++limit_checks_;
    return over_limit_from_ > 0 && limit_checks_ >= over_limit_from_;
  }
  void set_reply_over_limit_from(int n) {
    over_limit_from_ = n;
    limit_checks_ = 0;
  }
  int limit_checks() const { return limit_checks_; }
  net::ReplyMode reply_mode() const { return reply_mode_; }

  // ConnHost: only CompleteDeferred is used (the reply of a deferred command).
  int index() const override { return 0; }
  net::EventLoop& loop() override { return loop_; }
  net::BufferPool& pool() override { return pool_; }
  net::ConnStats& stats() override { return stats_; }
  void Release(net::Connection*) override {}
  void WaitDurable(net::Connection*, uint64_t) override {}
  void CompleteDeferred(uint64_t client_id, uint64_t slot, net::DeferredReply::WriteFn fn) override;

  // Whether the last command took a ticket, and its completed reply (waits
  // up to `deadline_ms`; nullptr write function when it never came).
  bool deferred() const { return deferred_; }
  // The writer of the command being run (HELLO switches its protocol).
  void set_writer(net::RespWriter* w) { writer_ = w; }
  net::DeferredReply::WriteFn WaitDeferred(uint64_t deadline_ms);
  void ClearDeferred() { deferred_ = false; }

 private:
  Server* server_;
  net::RespWriter* writer_ = nullptr;
  net::ClientInfo info_;
  int proto_ = 2;
  bool authenticated_ = true;
  bool close_after_reply_ = false;
  bool stopped_reading_ = false;
  bool deferred_ = false;
  int over_limit_from_ = 0;
  int limit_checks_ = 0;
  net::ReplyMode reply_mode_ = net::ReplyMode::kOn;
  uint64_t next_slot_ = 0;
  net::EventLoop loop_;
  net::BufferPool pool_{1 << 20};
  net::ConnStats stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, net::DeferredReply::WriteFn> completed_;  // guarded by mu_
};

class CommandTest : public ::testing::Test {
 protected:
  CommandTest() : CommandTest(Config()) {}
  explicit CommandTest(Config cfg, std::vector<CommandSpec> extra = {});
  ~CommandTest() override;

  // Runs one command (args[0] is the name) as the current client and returns
  // its reply, decoded. A reply that does not decode fails the test.
  RespValue Run(std::initializer_list<std::string_view> args);
  RespValue Run(const std::vector<std::string>& args);
  // Runs a command that answers with several replies (SUBSCRIBE a b) and
  // returns their bytes.
  const std::string& RunMany(std::initializer_list<std::string_view> args) {
    many_ = true;
    Run(args);
    many_ = false;
    return wire_;
  }
  // The hold-until LSN the last command returned (0: nothing to wait for).
  uint64_t last_wait_lsn() const { return last_wait_lsn_; }
  // The raw bytes of the last reply.
  const std::string& last_wire() const { return wire_; }

  // Makes client `n` current (0 is the first), creating it on first use.
  void SwitchClient(size_t n);
  FakeClient& client() { return *clients_[current_]; }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Server> server_;
  std::vector<std::unique_ptr<FakeClient>> clients_;
  size_t current_ = 0;
  uint64_t last_wait_lsn_ = 0;
  std::string wire_;
  bool many_ = false;
};

// With --kvcache (a store; no persistence).
Config KvConfig();

class KvTest : public CommandTest {
 protected:
  KvTest() : CommandTest(KvConfig()) {}
};

}  // namespace pion::server::testing
