// Tracking (server/tracking.h) without a server: what message each client is
// handed (RESP3 push, RESP2 redirect as a Pub/Sub message, broken redirect,
// NOLOOP, BCAST prefixes, FLUSHALL's null), and several threads tracking,
// writing and switching modes at once (in the tsan preset's list).
#include "server/tracking.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/client_registry.h"
#include "server/pubsub.h"

namespace pion::server {
namespace {

class Sink final : public PushSink {
 public:
  void Push(int worker, uint64_t id, const std::shared_ptr<const std::string>& msg) override {
    std::lock_guard<std::mutex> l(mu_);
    got_.push_back({worker, id, *msg});
  }
  struct Msg {
    int worker;
    uint64_t id;
    std::string bytes;
  };
  std::vector<Msg> Take() {
    std::lock_guard<std::mutex> l(mu_);
    return std::exchange(got_, {});
  }

 private:
  std::mutex mu_;
  std::vector<Msg> got_;
};

class TrackingTest : public ::testing::Test {
 protected:
  net::ClientInfo* Add(int proto, int worker = 0) {
    auto c = std::make_unique<net::ClientInfo>();
    c->id = registry_.NextId();
    c->worker = worker;
    c->proto.store(proto);
    registry_.Register(c.get());
    infos_.push_back(std::move(c));
    return infos_.back().get();
  }
  ~TrackingTest() override {
    for (auto& c : infos_) registry_.Unregister(c.get());
  }
  ClientRegistry registry_;
  Sink sink_;
  Tracking t_{&registry_, &sink_};
  std::vector<std::unique_ptr<net::ClientInfo>> infos_;
};

TEST_F(TrackingTest, Resp3PushOnceThenForgotten) {
  net::ClientInfo* c = Add(3, 1);
  t_.Enable(c, 0, 0, {});
  std::string_view keys[] = {"k"};
  t_.RememberKeys(*c, keys);
  EXPECT_EQ(t_.total_keys(), 1u);
  t_.InvalidateKey("k", 0);
  auto got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].worker, 1);
  EXPECT_EQ(got[0].id, c->id);
  EXPECT_EQ(got[0].bytes, "*2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
  t_.InvalidateKey("k", 0);  // forgotten after the first invalidation
  EXPECT_TRUE(sink_.Take().empty());
  EXPECT_EQ(t_.total_keys(), 0u);
}

TEST_F(TrackingTest, Resp2WithoutRedirectHearsNothing) {
  net::ClientInfo* c = Add(2);
  t_.Enable(c, 0, 0, {});
  std::string_view keys[] = {"k"};
  t_.RememberKeys(*c, keys);
  t_.InvalidateKey("k", 0);
  EXPECT_TRUE(sink_.Take().empty());
}

TEST_F(TrackingTest, RedirectToSubscribedResp2Client) {
  net::ClientInfo* r = Add(2, 1);
  r->pubsub.store(true);
  net::ClientInfo* c = Add(2, 0);
  t_.Enable(c, r->id, 0, {});
  std::string_view keys[] = {"key"};
  t_.RememberKeys(*c, keys);
  t_.InvalidateKey("key", 0);
  auto got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, r->id);
  EXPECT_EQ(got[0].bytes,
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$3\r\nkey\r\n");
  // FLUSHALL: a null, in the tracking client's protocol.
  t_.InvalidateAll();
  got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n");
}

TEST_F(TrackingTest, BrokenRedirect) {
  net::ClientInfo* r = Add(2);
  net::ClientInfo* c = Add(3);
  t_.Enable(c, r->id, 0, {});
  registry_.Unregister(r);
  std::string_view keys[] = {"k"};
  t_.RememberKeys(*c, keys);
  t_.InvalidateKey("k", 0);
  auto got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, c->id);
  EXPECT_EQ(got[0].bytes,
            "*2\r\n$21\r\ntracking-redir-broken\r\n:" + std::to_string(r->id) + "\r\n");
  EXPECT_TRUE(c->tracking.load() & kTrackBrokenRedir);
  registry_.Register(r);  // the fixture unregisters it
}

TEST_F(TrackingTest, NoloopAndBcast) {
  net::ClientInfo* a = Add(3);
  net::ClientInfo* b = Add(3);
  std::string_view pa[] = {"user:"};
  t_.Enable(a, 0, kTrackBcast | kTrackNoloop, pa);
  t_.Enable(b, 0, kTrackBcast, {});  // every key
  EXPECT_EQ(t_.total_prefixes(), 2u);
  t_.InvalidateKey("user:1", a->id);  // a wrote it: NOLOOP keeps it from a
  auto got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, b->id);
  t_.InvalidateKey("user:2", b->id);
  got = sink_.Take();
  ASSERT_EQ(got.size(), 2u);
  t_.InvalidateKey("other", 0);
  got = sink_.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, b->id);
  t_.Disable(a);
  t_.Disable(b);
  EXPECT_EQ(t_.total_prefixes(), 0u);
  EXPECT_EQ(t_.clients(), 0u);
}

// Clients on several threads read, write and switch tracking modes while
// others flush: run under TSan (the tsan preset) for the table's locking.
TEST_F(TrackingTest, ConcurrentTrackersAndWriters) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<net::ClientInfo*> cs;
  for (int i = 0; i < kThreads; ++i) cs.push_back(Add(3, i));
  t_.SetMaxKeys(50);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      net::ClientInfo* me = cs[static_cast<size_t>(i)];
      for (int r = 0; r < kRounds; ++r) {
        std::string key = "k" + std::to_string((r * 7 + i) % 97);
        std::string_view keys[] = {key};
        if (r % 500 == 0) {
          t_.Disable(me);
          if (i % 2 == 0) {
            std::string p = "k" + std::to_string(i);
            std::string_view ps[] = {p};
            t_.Enable(me, 0, kTrackBcast, ps);
          } else {
            t_.Enable(me, cs[0]->id, kTrackNoloop, {});
          }
        }
        t_.RememberKeys(*me, keys);
        t_.InvalidateKey(key, me->id);
        if (i == 0 && r % 400 == 0) t_.InvalidateAll();
        (void)t_.total_items();
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_LE(t_.total_keys(), 50u);
  EXPECT_FALSE(sink_.Take().empty());
  for (net::ClientInfo* c : cs) t_.Disable(c);
  EXPECT_EQ(t_.clients(), 0u);
  EXPECT_EQ(t_.total_prefixes(), 0u);
}

}  // namespace
}  // namespace pion::server
