#include "server/commands/testing/command_fixture.h"

#include <chrono>

#include "net/output_queue.h"
#include "net/resp_writer.h"
#include "server/commands/transaction.h"

namespace pion::server::testing {

namespace {

constexpr uint64_t kDeferredDeadlineMs = 60000;

std::string Drain(net::OutputQueue* q) {
  std::string out;
  iovec iov[64];
  while (true) {
    int n = q->Writable(~0ull, iov, 64);
    if (n == 0) break;
    size_t took = 0;
    for (int i = 0; i < n; ++i) {
      out.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
      took += iov[i].iov_len;
    }
    q->Consume(took);
  }
  return out;
}

}  // namespace

FakeClient::FakeClient(Server* server, uint64_t id) : server_(server) {
  info_.id = id;
  info_.addr = "127.0.0.1:" + std::to_string(40000 + id);
  info_.laddr = "127.0.0.1:1974";
  info_.control = this;
  authenticated_ = server->config().requirepass.empty();
  info_.authenticated.store(authenticated_, std::memory_order_relaxed);
  server_->clients().Register(&info_);
}

FakeClient::~FakeClient() {
  TxFree(&info_);  // a MULTI's queue, as a closing connection frees it (OnClose)
  server_->clients().Unregister(&info_);
}

void FakeClient::SetProto(int p) {
  proto_ = p;
  if (writer_ != nullptr) writer_->set_proto(p);
  info_.proto.store(p, std::memory_order_relaxed);
}

void FakeClient::SetAuthenticated(bool v) {
  authenticated_ = v;
  info_.authenticated.store(v, std::memory_order_relaxed);
}

bool FakeClient::ReserveMemory(size_t n) { return server_->client_eviction().Reserve(n, &info_); }

std::shared_ptr<net::DeferredReply> FakeClient::BeginDeferred() {
  deferred_ = true;
  return std::make_shared<net::DeferredReply>(this, info_.id, ++next_slot_);
}

void FakeClient::CompleteDeferred(uint64_t, uint64_t slot, net::DeferredReply::WriteFn fn) {
  std::lock_guard<std::mutex> lk(mu_);
  completed_[slot] = std::move(fn);
  cv_.notify_all();
}

net::DeferredReply::WriteFn FakeClient::WaitDeferred(uint64_t deadline_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(deadline_ms),
               [&] { return completed_.count(next_slot_) != 0; });
  auto it = completed_.find(next_slot_);
  if (it == completed_.end()) return nullptr;
  auto fn = std::move(it->second);
  completed_.erase(it);
  return fn;
}

CommandTest::CommandTest(Config cfg, std::vector<CommandSpec> extra)
    : server_(std::make_unique<Server>(std::move(cfg), std::move(extra))) {
  server_->background().Start();
  SwitchClient(0);
}

CommandTest::~CommandTest() {
  server_->background().Stop();
  clients_.clear();
}

void CommandTest::SwitchClient(size_t n) {
  while (clients_.size() <= n)
    clients_.push_back(std::make_unique<FakeClient>(server_.get(), server_->clients().NextId()));
  current_ = n;
}

RespValue CommandTest::Run(std::initializer_list<std::string_view> args) {
  return Run(std::vector<std::string>(args.begin(), args.end()));
}

RespValue CommandTest::Run(const std::vector<std::string>& args) {
  FakeClient& c = client();
  std::vector<std::string_view> views(args.begin(), args.end());
  net::BufferPool pool(1 << 20);
  net::OutputQueue out(&pool);
  net::RespWriter writer(&out);
  writer.set_proto(c.proto());
  net::ConnContext ctx{&c, &c.info(), c.authenticated()};
  c.ClearDeferred();
  c.set_writer(&writer);
  last_wait_lsn_ = server_->service()->Dispatch(views, writer, ctx);
  c.set_writer(nullptr);
  if (c.deferred()) {
    auto fn = c.WaitDeferred(kDeferredDeadlineMs);
    EXPECT_TRUE(fn != nullptr) << args[0] << ": deferred reply never completed";
    net::RespWriter later(&out);
    later.set_proto(c.proto());
    if (fn) fn(later);
  }
  wire_ = Drain(&out);
  std::string_view in = wire_;
  auto v = ParseResp(&in);
  EXPECT_TRUE(v.has_value()) << args[0] << ": reply does not decode: " << wire_;
  if (!many_) {
    EXPECT_TRUE(in.empty()) << args[0] << ": more than one reply: " << wire_;
  }
  return v.value_or(RespValue{});
}

Config KvConfig() {
  Config c;
  c.kvcache = true;
  return c;
}

}  // namespace pion::server::testing
