// RespWriter + OutputQueue: RESP2/RESP3 encodings, BulkReserve/BulkExternal
// ordering and pin release, partial writes, and deferred-reply holds.
#include "net/resp_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "net/output_queue.h"

namespace pion::net {
namespace {

// Everything writable at `durable`, concatenated, consumed.
std::string Drain(OutputQueue* q, uint64_t durable = ~0ull, size_t max_bytes = ~size_t{0}) {
  std::string out;
  iovec iov[64];
  while (true) {
    int n = q->Writable(durable, iov, 64);
    if (n == 0) break;
    size_t took = 0;
    for (int i = 0; i < n && took < max_bytes; ++i) {
      size_t k = std::min(iov[i].iov_len, max_bytes - took);
      out.append(static_cast<const char*>(iov[i].iov_base), k);
      took += k;
    }
    q->Consume(took);
    if (max_bytes != ~size_t{0}) break;
  }
  return out;
}

struct Fixture {
  BufferPool pool{1 << 20};
  OutputQueue q{&pool};
  RespWriter w{&q};
};

TEST(RespWriter, Resp2Encodings) {
  Fixture f;
  f.w.SimpleString("OK");
  f.w.Error("ERR bad\r\nthing");
  f.w.Integer(-42);
  f.w.Bulk("hello");
  f.w.Bulk("");
  f.w.Null();
  f.w.NullArray();
  f.w.ArrayHeader(2);
  f.w.MapHeader(3);
  f.w.SetHeader(1);
  f.w.Double(1.5);
  f.w.Boolean(true);
  f.w.Verbatim("a:b");
  EXPECT_EQ(Drain(&f.q),
            "+OK\r\n-ERR bad  thing\r\n:-42\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*2\r\n"
            "*6\r\n*1\r\n$3\r\n1.5\r\n:1\r\n$3\r\na:b\r\n");
  EXPECT_EQ(f.w.errors(), 1u);
}

TEST(RespWriter, Resp3Encodings) {
  Fixture f;
  f.w.set_proto(3);
  f.w.Null();
  f.w.NullArray();
  f.w.MapHeader(3);
  f.w.SetHeader(2);
  f.w.Double(-0.25);
  f.w.Double(1.0 / 0.0);
  f.w.Boolean(false);
  f.w.Verbatim("# Server\r\n");
  EXPECT_EQ(Drain(&f.q),
            "_\r\n_\r\n%3\r\n~2\r\n,-0.25\r\n,inf\r\n#f\r\n=14\r\ntxt:# Server\r\n\r\n");
}

TEST(RespWriter, LargeBulkIsCopiedOnceIntoItsOwnBuffer) {
  Fixture f;
  std::string big(100000, 'x');
  f.w.Bulk(big);
  f.w.SimpleString("after");
  EXPECT_EQ(Drain(&f.q), "$100000\r\n" + big + "\r\n+after\r\n");
}

TEST(RespWriter, BulkReserveAndExternalKeepOrder) {
  Fixture f;
  f.w.SimpleString("first");
  uint8_t* p = f.w.BulkReserve(4);
  std::memcpy(p, "RSV!", 4);
  static const char a[] = "abc", b[] = "defgh";
  iovec parts[2] = {{const_cast<char*>(a), 3}, {const_cast<char*>(b), 5}};
  auto pin = std::make_shared<int>(7);
  std::weak_ptr<int> weak = pin;
  f.w.BulkExternal(8, parts, pin);
  pin.reset();
  EXPECT_FALSE(weak.expired());  // held by the queue
  f.w.Integer(1);
  EXPECT_EQ(Drain(&f.q), "+first\r\n$4\r\nRSV!\r\n$8\r\nabcdefgh\r\n:1\r\n");
  EXPECT_TRUE(weak.expired());  // released once written
  EXPECT_TRUE(f.q.empty());
}

TEST(RespWriter, SmallBulkReserveJoinsTheArenaLargeGetsItsOwnBuffer) {
  Fixture f;
  f.w.SimpleString("a");
  uint8_t* small = f.w.BulkReserve(3);
  uint8_t* tried = f.w.TryBulkReserve(2);
  f.w.Integer(5);  // filled after later appends: the reserved bytes stay put
  std::memcpy(small, "xyz", 3);
  std::memcpy(tried, "pq", 2);
  iovec iov[8];
  EXPECT_EQ(f.q.Writable(~0ull, iov, 8), 1);  // one arena run, no owned segment
  EXPECT_EQ(f.q.allocated_bytes(), f.q.arena_capacity());
  size_t n = RespWriter::kCopyThreshold;
  uint8_t* big = f.w.TryBulkReserve(n);
  ASSERT_NE(big, nullptr);
  std::memset(big, 'b', n);
  size_t owned = f.q.allocated_bytes() - f.q.arena_capacity();
  EXPECT_GE(owned, n);
  std::memset(f.w.BulkReserve(n - 1), 'c', n - 1);  // below the threshold: arena
  EXPECT_EQ(f.q.allocated_bytes() - f.q.arena_capacity(), owned);
  EXPECT_EQ(Drain(&f.q), "+a\r\n$3\r\nxyz\r\n$2\r\npq\r\n:5\r\n$" + std::to_string(n) + "\r\n" +
                             std::string(n, 'b') + "\r\n$" + std::to_string(n - 1) + "\r\n" +
                             std::string(n - 1, 'c') + "\r\n");
}

TEST(RespWriter, PinReleasedOnlyAfterLastByte) {
  Fixture f;
  static const char a[] = "0123456789";
  iovec part = {const_cast<char*>(a), 10};
  auto pin = std::make_shared<int>(1);
  std::weak_ptr<int> weak = pin;
  f.w.BulkExternal(10, {&part, 1}, std::move(pin));
  std::string got = Drain(&f.q, ~0ull, 9);  // "$10\r\n" + "0123"
  EXPECT_EQ(got, "$10\r\n0123");
  EXPECT_FALSE(weak.expired());
  got += Drain(&f.q, ~0ull, 5);
  EXPECT_FALSE(weak.expired());
  got += Drain(&f.q, ~0ull, 1);  // the final body byte: '9' is sent
  EXPECT_TRUE(weak.expired());
  got += Drain(&f.q);
  EXPECT_EQ(got, "$10\r\n0123456789\r\n");
}

TEST(OutputQueue, PartialWritesAcrossSegments) {
  Fixture f;
  std::string expect;
  for (int i = 0; i < 100; ++i) {
    f.w.Bulk(std::string(static_cast<size_t>(i) * 500, 'a' + i % 26));
    expect += "$" + std::to_string(i * 500) + "\r\n" +
              std::string(static_cast<size_t>(i) * 500, 'a' + i % 26) + "\r\n";
  }
  std::string got;
  while (!f.q.empty()) got += Drain(&f.q, ~0ull, 777);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(f.q.bytes(), 0u);
}

TEST(OutputQueue, HoldsDeferRepliesInOrder) {
  Fixture f;
  f.w.SimpleString("a");  // not held
  OutputQueue::Mark m = f.q.GetMark();
  f.w.SimpleString("b");  // the durable write's reply
  f.q.HoldFrom(m, 5);
  f.w.SimpleString("c");  // a later read: held behind it
  EXPECT_EQ(Drain(&f.q, 0), "+a\r\n");
  EXPECT_EQ(f.q.HeadHold(), 5u);
  EXPECT_EQ(Drain(&f.q, 4), "");
  m = f.q.GetMark();
  f.w.SimpleString("d");
  f.q.HoldFrom(m, 9);
  EXPECT_EQ(Drain(&f.q, 5), "+b\r\n+c\r\n");
  EXPECT_EQ(Drain(&f.q, 8), "");
  EXPECT_EQ(Drain(&f.q, 9), "+d\r\n");
  EXPECT_TRUE(f.q.empty());
}

TEST(OutputQueue, HoldAfterPartialWriteOfMergedSegment) {
  Fixture f;
  f.w.SimpleString("xxxx");
  EXPECT_EQ(Drain(&f.q, 0, 3), "+xx");
  OutputQueue::Mark m = f.q.GetMark();
  f.w.SimpleString("yy");
  f.q.HoldFrom(m, 3);
  EXPECT_EQ(Drain(&f.q, 0), "xx\r\n");
  EXPECT_EQ(Drain(&f.q, 3), "+yy\r\n");
}

TEST(OutputQueue, LowerHoldNeverReordersReplies) {
  Fixture f;
  OutputQueue::Mark m = f.q.GetMark();
  f.w.SimpleString("w1");
  f.q.HoldFrom(m, 10);
  m = f.q.GetMark();
  f.w.SimpleString("w2");
  f.q.HoldFrom(m, 3);  // durable earlier, but must wait behind w1
  EXPECT_EQ(Drain(&f.q, 3), "");
  EXPECT_EQ(Drain(&f.q, 10), "+w1\r\n+w2\r\n");
}

TEST(OutputQueue, ASlotFilledFromAScratchQueueKeepsTheValueByReference) {
  Fixture f;
  f.w.SimpleString("a");
  f.q.AddSlot(7);
  f.w.SimpleString("c");
  EXPECT_EQ(Drain(&f.q), "+a\r\n");  // the slot holds what follows
  const std::string value(100000, 'v');
  auto pin = std::make_shared<int>(1);
  std::weak_ptr<int> weak = pin;
  {
    OutputQueue scratch(nullptr);  // as Connection::FinishDeferred encodes a reply
    RespWriter w(&scratch);
    iovec part{const_cast<char*>(value.data()), value.size()};
    w.BulkExternal(value.size(), {&part, 1}, std::move(pin));
    EXPECT_TRUE(f.q.FillSlotFrom(7, scratch));
    EXPECT_FALSE(f.q.FillSlotFrom(7, scratch));  // filled already
  }
  EXPECT_EQ(f.q.pending_slots(), 0u);
  EXPECT_FALSE(weak.expired());  // the pin moved with the value
  // The value is sent from its own memory (not a copy).
  iovec iov[8];
  const int n = f.q.Writable(~0ull, iov, 8);
  bool by_reference = false;
  for (int i = 0; i < n; ++i) by_reference |= iov[i].iov_base == value.data();
  EXPECT_TRUE(by_reference);
  EXPECT_EQ(Drain(&f.q), "$100000\r\n" + value + "\r\n+c\r\n");
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(f.q.bytes(), 0u);
}

TEST(OutputQueue, ASlotFilledFromSmallAndOwnedReplies) {
  Fixture f;
  f.q.AddSlot(1);
  f.q.AddSlot(2);
  f.q.AddSlot(3);
  const std::string big(50000, 'b');
  {
    OutputQueue scratch(nullptr);
    RespWriter w(&scratch);
    w.ArrayHeader(2);
    w.Bulk("x");
    w.Bulk(big);  // an owned buffer of its own: moved, not copied
    EXPECT_TRUE(f.q.FillSlotFrom(2, scratch));
  }
  EXPECT_EQ(Drain(&f.q), "");  // slot 1 is still pending
  {
    OutputQueue scratch(nullptr);
    EXPECT_TRUE(f.q.FillSlotFrom(1, scratch));  // an empty reply: the slot goes
  }
  {
    OutputQueue scratch(nullptr);
    RespWriter w(&scratch);
    w.Integer(42);
    EXPECT_TRUE(f.q.FillSlotFrom(3, scratch));
  }
  EXPECT_EQ(Drain(&f.q, ~0ull), "*2\r\n$1\r\nx\r\n$50000\r\n" + big + "\r\n:42\r\n");
  EXPECT_TRUE(f.q.empty());
  EXPECT_EQ(f.q.allocated_bytes(), f.q.arena_capacity());  // no owned buffer left behind
}

TEST(BufferPool, ReusesAndCaps) {
  BufferPool pool(1 << 20);
  IoBuf b = pool.Get(100000);
  char* p = b.data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  pool.Put(std::move(b));
  IoBuf c = pool.Get(90000);
  EXPECT_EQ(c.data(), p);
  pool.Put(IoBuf(2 << 20));  // larger than the cap: freed
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

}  // namespace
}  // namespace pion::net
