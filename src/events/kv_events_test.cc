// The KV-event codec against msgpack bytes built by hand from the format's rules,
// and the publisher against real ZeroMQ sockets: topic and sequence frames, replay
// over ROUTER, drops at the high-water mark and at the queue bound.
#include <gtest/gtest.h>
#include <zmq.h>

#include <cstdint>
#include <msgpack/pack.hpp>
#include <string>
#include <thread>
#include <vector>

#include "events/kv_event_codec.h"
#include "events/kv_event_publisher.h"

namespace pion::events {
namespace {

std::string Str(std::string_view s) {  // fixstr (< 32 bytes)
  return std::string(1, static_cast<char>(0xa0 | s.size())) + std::string(s);
}

TEST(KvEventCodec, BatchBytesAreVllmsMapForm) {
  KvEventBatch b;
  b.ts = 1.5;
  KvEvent stored;
  stored.type = KvEventType::kBlockStored;
  stored.block_hashes = {1, 0x1234, 0xfedcba9876543210ull};
  stored.parent_block_hash = 7;
  stored.block_size = 16;
  KvEvent removed;
  removed.type = KvEventType::kBlockRemoved;
  removed.block_hashes = {300};
  KvEvent cleared;  // kAllBlocksCleared
  KvEvent root = stored;
  root.parent_block_hash.reset();
  root.block_hashes = {};
  b.events = {stored, removed, cleared, root};
  std::string got;
  EncodeKvEventBatch(b, "SHARED", &got);

  std::string want;
  want += '\x93';                                                  // [ts, events, rank]
  want += std::string("\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 9);  // float64 1.5
  want += '\x94';                                                  // four events
  want += '\x89' + Str("type") + Str("BlockStored") + Str("block_hashes") + '\x93' + '\x01' +
          std::string("\xcd\x12\x34", 3) + std::string("\xcf\xfe\xdc\xba\x98\x76\x54\x32\x10", 9) +
          Str("parent_block_hash") + '\x07' + Str("token_ids") + '\x90' + Str("block_size") +
          '\x10' + Str("lora_id") + '\xc0' + Str("medium") + Str("SHARED") + Str("lora_name") +
          '\xc0' + Str("group_idx") + '\x00';
  want += '\x84' + Str("type") + Str("BlockRemoved") + Str("block_hashes") + '\x91' +
          std::string("\xcd\x01\x2c", 3) + Str("medium") + Str("SHARED") + Str("group_idx") +
          '\x00';
  want += '\x81' + Str("type") + Str("AllBlocksCleared");
  want += '\x89' + Str("type") + Str("BlockStored") + Str("block_hashes") + '\x90' +
          Str("parent_block_hash") + '\xc0' + Str("token_ids") + '\x90' + Str("block_size") +
          '\x10' + Str("lora_id") + '\xc0' + Str("medium") + Str("SHARED") + Str("lora_name") +
          '\xc0' + Str("group_idx") + '\x00';
  want += '\x00';  // data-parallel rank
  EXPECT_EQ(got, want);
}

// What msgpack-cxx's own packer writes for a batch, field by field (the codec
// writes the variable fields itself): every integer width and array size class.
struct RefSink {
  std::string* s;
  void write(const char* p, size_t n) { s->append(p, n); }
};

std::string Reference(const KvEventBatch& b, std::string_view medium) {
  std::string out;
  RefSink sink{&out};
  msgpack::packer<RefSink> pk(sink);
  auto str = [&](std::string_view v) {
    pk.pack_str(static_cast<uint32_t>(v.size()));
    pk.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
  };
  auto hashes = [&](const std::vector<uint64_t>& h) {
    pk.pack_array(static_cast<uint32_t>(h.size()));
    for (uint64_t x : h) pk.pack_uint64(x);
  };
  pk.pack_array(3);
  pk.pack_double(b.ts);
  pk.pack_array(static_cast<uint32_t>(b.events.size()));
  for (const KvEvent& e : b.events) {
    if (e.type == KvEventType::kBlockStored) {
      pk.pack_map(9);
      str("type"), str("BlockStored"), str("block_hashes"), hashes(e.block_hashes);
      str("parent_block_hash");
      e.parent_block_hash ? pk.pack_uint64(*e.parent_block_hash) : pk.pack_nil();
      str("token_ids"), pk.pack_array(0), str("block_size"), pk.pack_uint32(e.block_size);
      str("lora_id"), pk.pack_nil(), str("medium"), str(medium), str("lora_name");
      pk.pack_nil(), str("group_idx"), pk.pack_uint32(0);
    } else if (e.type == KvEventType::kBlockRemoved) {
      pk.pack_map(4);
      str("type"), str("BlockRemoved"), str("block_hashes"), hashes(e.block_hashes);
      str("medium"), str(medium), str("group_idx"), pk.pack_uint32(0);
    } else {
      pk.pack_map(1);
      str("type"), str("AllBlocksCleared");
    }
  }
  pk.pack_uint32(0);
  return out;
}

TEST(KvEventCodec, EveryWidthIsWhatMsgpacksPackerWrites) {
  const uint64_t edges[] = {0,          1,           127,          128,
                            255,        256,         65535,        65536,
                            0xffffffff, 0x100000000, ~uint64_t{0}, 0x4242424242424242};
  KvEventBatch b;
  b.ts = 1764720000.123456;
  for (uint64_t v : edges) {
    KvEvent s;
    s.type = KvEventType::kBlockStored;
    s.block_hashes = {v, v / 3};
    s.parent_block_hash = v;
    s.block_size = static_cast<uint32_t>(v);
    b.events.push_back(s);
  }
  for (size_t n : {size_t{15}, size_t{16}, size_t{65535}, size_t{65536}}) {
    KvEvent r;
    r.type = KvEventType::kBlockRemoved;
    for (size_t i = 0; i < n; ++i) r.block_hashes.push_back(i * 0x9e3779b97f4a7c15ull);
    b.events.push_back(r);
  }
  b.events.emplace_back();  // AllBlocksCleared
  for (std::string_view medium : {"SHARED", "CPU_TIER2", "a-medium-name-longer-than-31-bytes"}) {
    std::string got = "prefix";  // appended to what is there
    EncodeKvEventBatch(b, medium, &got);
    EXPECT_EQ(got, "prefix" + Reference(b, medium)) << medium;
    // Encoded event by event, as a worker does, then wrapped: the same bytes.
    KvEncodedEvents enc;
    for (const KvEvent& e : b.events)
      AppendKvEvent(e.type, e.block_hashes, e.parent_block_hash, e.block_size, medium, &enc);
    EXPECT_EQ(enc.count, b.events.size());
    std::string wrapped;
    EncodeKvEventPayload(b.ts, enc, &wrapped);
    EXPECT_EQ(wrapped, Reference(b, medium)) << medium;
  }
}

TEST(KvEventCodec, SeqIsEightBytesBigEndian) {
  EXPECT_EQ(EncodeSeq(0), std::string(8, '\0'));
  EXPECT_EQ(EncodeSeq(0x0102030405060708ull), "\x01\x02\x03\x04\x05\x06\x07\x08");
}

TEST(KvEventEndpoint, BindsAsVllmDecides) {
  EXPECT_TRUE(KvEventEndpointBinds("tcp://*:5557"));
  EXPECT_TRUE(KvEventEndpointBinds("tcp://[::]:5557"));
  EXPECT_TRUE(KvEventEndpointBinds("ipc:///tmp/x"));
  EXPECT_TRUE(KvEventEndpointBinds("inproc://x"));
  EXPECT_FALSE(KvEventEndpointBinds("tcp://indexer:5557"));
  EXPECT_FALSE(KvEventEndpointBinds("tcp://127.0.0.1:5557"));
}

struct Message {
  std::vector<std::string> frames;
};

Message Recv(void* sock) {
  Message m;
  int more = 1;
  while (more) {
    zmq_msg_t f;
    zmq_msg_init(&f);
    int rc = zmq_msg_recv(&f, sock, 0);
    EXPECT_GE(rc, 0) << zmq_strerror(zmq_errno());
    if (rc < 0) {
      zmq_msg_close(&f);
      break;
    }
    m.frames.emplace_back(static_cast<const char*>(zmq_msg_data(&f)), zmq_msg_size(&f));
    more = zmq_msg_more(&f);
    zmq_msg_close(&f);
  }
  return m;
}

KvEventBatch OneStored(uint64_t h) {
  KvEventBatch b;
  b.ts = 2.0;
  KvEvent e;
  e.type = KvEventType::kBlockStored;
  e.block_hashes = {h};
  b.events.push_back(e);
  return b;
}

uint64_t SeqOf(const std::string& f) {
  uint64_t s = 0;
  for (unsigned char c : f) s = (s << 8) | c;
  return s;
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = zmq_ctx_new();
    const int timeout_ms = 10000;  // a hang detector, not a timed assertion
    sub_ = zmq_socket(ctx_, ZMQ_SUB);
    zmq_setsockopt(sub_, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  }
  void TearDown() override {
    zmq_close(sub_);
    zmq_ctx_term(ctx_);
  }
  // Waits until the publisher has seen the subscription (XPUB delivers it as a
  // message; a probe batch sent after that reaches the subscriber): sends probes
  // until one arrives, and returns the seq after the last probe.
  uint64_t Sync(KvEventPublisher& pub) {
    const int probe_wait_ms = 50;
    zmq_setsockopt(sub_, ZMQ_RCVTIMEO, &probe_wait_ms, sizeof(probe_wait_ms));
    uint64_t next = 0;
    for (int i = 0; i < 400; ++i) {  // bounded: 400 probes
      pub.Submit(OneStored(999));
      ++next;
      zmq_msg_t f;
      zmq_msg_init(&f);
      const bool got = zmq_msg_recv(&f, sub_, 0) >= 0;
      const bool more = got && zmq_msg_more(&f);
      zmq_msg_close(&f);
      if (got) {
        if (more) Recv(sub_);  // the rest of that message
        break;
      }
    }
    const int timeout_ms = 10000;
    zmq_setsockopt(sub_, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
    return next;
  }
  void* ctx_ = nullptr;
  void* sub_ = nullptr;
};

TEST_F(PublisherTest, FramesCarryTopicSeqAndPayloadAndReplayResends) {
  KvEventOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.topic = "kv@test@pion";
  o.buffer_steps = 1000;
  KvEventPublisher pub(o);
  ASSERT_TRUE(pub.Start().ok());
  ASSERT_EQ(zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "kv@", 3), 0);
  ASSERT_EQ(zmq_connect(sub_, pub.last_endpoint().c_str()), 0);
  uint64_t next = Sync(pub);
  // Probes may still be queued behind the sync point: read until seq `next`.
  pub.Submit(OneStored(42));
  Message m;
  for (int i = 0; i < 1000; ++i) {
    m = Recv(sub_);
    ASSERT_EQ(m.frames.size(), 3u);
    if (SeqOf(m.frames[1]) == next) break;
  }
  EXPECT_EQ(m.frames[0], "kv@test@pion");
  EXPECT_EQ(SeqOf(m.frames[1]), next);
  std::string want;
  KvEventBatch b = OneStored(42);
  EncodeKvEventBatch(b, "SHARED", &want);
  EXPECT_EQ(m.frames[2], want);

  // Replay from `next` through a DEALER: [seq, payload] ..., then [-1, ""].
  void* dealer = zmq_socket(ctx_, ZMQ_DEALER);
  const int timeout_ms = 10000;
  zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  ASSERT_EQ(zmq_connect(dealer, pub.last_replay_endpoint().c_str()), 0);
  std::string start = EncodeSeq(next);
  ASSERT_EQ(zmq_send(dealer, start.data(), start.size(), 0), 8);
  Message r = Recv(dealer);
  ASSERT_EQ(r.frames.size(), 2u);
  EXPECT_EQ(SeqOf(r.frames[0]), next);
  EXPECT_EQ(r.frames[1], want);
  Message end = Recv(dealer);
  ASSERT_EQ(end.frames.size(), 2u);
  EXPECT_EQ(end.frames[0], std::string(8, '\xff'));
  EXPECT_EQ(end.frames[1], "");
  zmq_close(dealer);
  pub.Stop();
  KvEventStats s = pub.Stats();
  EXPECT_EQ(s.batches, next + 1);
  EXPECT_EQ(s.replayed, 1u);
  EXPECT_EQ(s.published + s.dropped, next + 1);
}

TEST_F(PublisherTest, ASubscriberPastItsHighWaterMarkCostsDroppedBatchesNotAStall) {
  KvEventOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.hwm = 2;
  KvEventPublisher tcp(o);
  ASSERT_TRUE(tcp.Start().ok());
  const int rcvhwm = 1;
  zmq_setsockopt(sub_, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm));
  ASSERT_EQ(zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "", 0), 0);
  ASSERT_EQ(zmq_connect(sub_, tcp.last_endpoint().c_str()), 0);
  Sync(tcp);
  // The subscriber stops reading; the kernel's socket buffers fill, then ZeroMQ's
  // pipe, then sends fail and are counted. Bounded: at most 200,000 batches.
  KvEventBatch big;
  KvEvent e;
  e.type = KvEventType::kBlockRemoved;
  e.block_hashes.assign(4096, 1);  // ~40 KB a batch
  big.events.push_back(e);
  for (int i = 0; i < 200000 && tcp.Stats().dropped == 0; ++i) {
    KvEventBatch copy = big;
    tcp.Submit(std::move(copy));
    if (i % 64 == 63) {
      // Let the publisher thread catch up so that drops come from the network
      // side, not from the queue bound.
      for (int w = 0; w < 100000 &&
                      tcp.Stats().published + tcp.Stats().dropped < static_cast<uint64_t>(i) - 32;
           ++w)
        std::this_thread::yield();
    }
  }
  EXPECT_GT(tcp.Stats().dropped, 0u);
  tcp.Stop();
}

TEST_F(PublisherTest, WithNoSubscriberBatchesAreKeptAndReplayEncodesThem) {
  KvEventOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.topic = "kv@quiet@pion";
  KvEventPublisher pub(o);
  ASSERT_TRUE(pub.Start().ok());
  // A subscription to another topic does not count as a listener.
  ASSERT_EQ(zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "other", 5), 0);
  ASSERT_EQ(zmq_connect(sub_, pub.last_endpoint().c_str()), 0);
  std::vector<std::string> want;
  for (uint64_t h : {5u, 6u, 7u}) {
    KvEventBatch b = OneStored(h);
    want.emplace_back();
    EncodeKvEventBatch(b, "SHARED", &want.back());
    ASSERT_TRUE(pub.Submit(std::move(b)));
  }
  for (int w = 0; w < 1000000 && pub.Stats().published < 3; ++w) std::this_thread::yield();
  ASSERT_EQ(pub.Stats().published, 3u);  // counted though nobody listened
  void* dealer = zmq_socket(ctx_, ZMQ_DEALER);
  const int timeout_ms = 10000;
  zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  ASSERT_EQ(zmq_connect(dealer, pub.last_replay_endpoint().c_str()), 0);
  std::string start = EncodeSeq(0);
  ASSERT_EQ(zmq_send(dealer, start.data(), start.size(), 0), 8);
  for (uint64_t seq = 0; seq < 3; ++seq) {
    Message r = Recv(dealer);
    ASSERT_EQ(r.frames.size(), 2u);
    EXPECT_EQ(SeqOf(r.frames[0]), seq);
    EXPECT_EQ(r.frames[1], want[seq]);
  }
  EXPECT_EQ(Recv(dealer).frames.at(0), std::string(8, '\xff'));
  zmq_close(dealer);
  pub.Stop();
}

TEST(KvEventPublisherQueue, AFullQueueDropsAndCountsTheBatch) {
  KvEventOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.max_queue = 0;  // nothing may wait: every batch is dropped at the queue
  KvEventPublisher pub(o);
  ASSERT_TRUE(pub.Start().ok());
  EXPECT_FALSE(pub.Submit(OneStored(1)));
  EXPECT_FALSE(pub.Submit(OneStored(2)));
  KvEventStats s = pub.Stats();
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.batches, 2u);  // they still took their sequence numbers
  EXPECT_EQ(s.published, 0u);
}

TEST(KvEventPublisherStart, ABadEndpointIsAnErrorNamingIt) {
  KvEventOptions o;
  o.endpoint = "nonsense://here";
  KvEventPublisher pub(o);
  Status s = pub.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kv-events-endpoint 'nonsense://here'"), std::string_view::npos)
      << s.message();
  KvEventOptions r;
  r.endpoint = "tcp://127.0.0.1:*";
  r.replay_endpoint = "tcp://256.1.1.1:1";
  KvEventPublisher pub2(r);
  Status s2 = pub2.Start();
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("kv-events-replay-endpoint"), std::string_view::npos);
}

}  // namespace
}  // namespace pion::events
