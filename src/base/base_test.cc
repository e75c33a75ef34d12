#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/atomic_raise.h"
#include "base/cpu.h"
#include "base/crc32c.h"
#include "base/fp16.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/owned_buffer.h"
#include "base/rw_mutex.h"
#include "base/status.h"
#include "base/strutil.h"
#include "base/testing/glob_reference.h"
#include "base/thread_pool.h"

namespace pion {
namespace {

TEST(OwnedBuffer, MovesAndReleasesOnce) {
  static int released = 0;
  released = 0;
  auto rel = [](void* p, size_t) {
    ++released;
    std::free(p);
  };
  {
    OwnedBuffer a(std::malloc(100), 100, rel);
    OwnedBuffer b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b.capacity(), 100u);
    OwnedBuffer c;
    c = std::move(b);
    EXPECT_EQ(released, 0);
    c = OwnedBuffer(std::malloc(10), 10, rel);  // the first block goes back
    EXPECT_EQ(released, 1);
  }
  EXPECT_EQ(released, 2);
}

TEST(BufferRecycler, KeepsBoundedBlocksAndReusesThem) {
  constexpr size_t kB = BufferRecycler::kMinBytes;
  BufferRecycler r(4 * kB);
  r.Put(std::aligned_alloc(64, kB / 2), kB / 2);  // too small to keep: freed
  EXPECT_EQ(r.cached_bytes(), 0u);
  void* p = std::aligned_alloc(64, 2 * kB);
  r.Put(p, 2 * kB);
  EXPECT_EQ(r.cached_bytes(), 2 * kB);
  // Too large for what is cached (more than twice the size asked): a miss.
  EXPECT_EQ(r.Take(kB / 2).first, nullptr);
  auto [q, cap] = r.Take(2 * kB - 100);
  EXPECT_EQ(q, p);
  EXPECT_EQ(cap, 2 * kB);
  EXPECT_EQ(r.cached_bytes(), 0u);
  EXPECT_EQ(r.hits(), 1u);
  EXPECT_EQ(r.misses(), 1u);
  r.Put(q, cap);
  // Full: the smallest cached blocks make room, a block over the bound is freed.
  r.Put(std::aligned_alloc(64, 2 * kB), 2 * kB);
  EXPECT_EQ(r.cached_bytes(), 4 * kB);
  r.Put(std::aligned_alloc(64, 3 * kB), 3 * kB);
  EXPECT_LE(r.cached_bytes(), 4 * kB);
  r.Put(std::aligned_alloc(64, 8 * kB), 8 * kB);
  EXPECT_LE(r.cached_bytes(), 4 * kB);
  r.set_max_bytes(0);
  EXPECT_EQ(r.cached_bytes(), 0u);
}

TEST(AtomicRaise, StoresOnlyAHigherValueAndSaysWhether) {
  std::atomic<uint64_t> a{10};
  EXPECT_FALSE(base::AtomicRaise(&a, uint64_t{3}));
  EXPECT_FALSE(base::AtomicRaise(&a, uint64_t{10}));
  EXPECT_EQ(a.load(), 10u);
  EXPECT_TRUE(base::AtomicRaise(&a, uint64_t{11}, std::memory_order_relaxed));
  EXPECT_EQ(a.load(), 11u);
  // Racing raises keep the maximum: each thread raises through its own values,
  // interleaved with the others'.
  std::atomic<uint64_t> m{0};
  std::vector<std::thread> ts;
  for (uint64_t t = 0; t < 4; ++t)
    ts.emplace_back([&m, t] {
      for (uint64_t i = 0; i < 20000; ++i) base::AtomicRaise(&m, i * 4 + t);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(m.load(), 19999u * 4 + 3);
}

TEST(Status, OkAndError) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  Status e = Status::InvalidArgument("bad thing");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_EQ(e.message(), "bad thing");
  Status copy = e;
  EXPECT_EQ(copy.message(), "bad thing");
  Result<int> r = 5;
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(*r, 5);
  Result<int> bad = Status::NotFound("x");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
}

// Two reason enums as two modules would declare them (base knows neither).
enum class FirstReason : uint16_t { kNone, kA, kB };
constexpr std::string_view ReasonDomain(FirstReason) { return "first"; }
enum class SecondReason : uint16_t { kNone, kA };
constexpr std::string_view ReasonDomain(SecondReason) { return "second"; }

TEST(Status, CarriesAReasonItsFieldsAndAName) {
  Status s(Code::kInvalidArgument, FirstReason::kB, {7, -2}, "log only");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(s.has_reason());
  EXPECT_EQ(s.reason<FirstReason>(), FirstReason::kB);
  // Same underlying value, another enum: not this status's reason.
  EXPECT_EQ(s.reason<SecondReason>(), SecondReason::kNone);
  EXPECT_EQ(s.field(0), 7);
  EXPECT_EQ(s.field(1), -2);
  EXPECT_EQ(s.field(3), 0);
  EXPECT_EQ(s.message(), "log only");
  EXPECT_EQ(s.ToString(), "InvalidArgument: [first 2 (7, -2, 0, 0)] log only");
  Status named = Status(Code::kNotFound, SecondReason::kA).WithName("x");
  EXPECT_EQ(named.reason<SecondReason>(), SecondReason::kA);
  EXPECT_EQ(named.name(), "x");
  EXPECT_EQ(named.ToString(), "NotFound: [second 1 (0, 0, 0, 0) 'x']");
  // A reason survives Result and copies; OK has none; a message-only status has none.
  Result<int> r = named;
  EXPECT_EQ(r.status().reason<SecondReason>(), SecondReason::kA);
  EXPECT_FALSE(Status().has_reason());
  EXPECT_EQ(Status().reason<FirstReason>(), FirstReason::kNone);
  EXPECT_FALSE(Status::IOError("disk").has_reason());
  EXPECT_EQ(Status::IOError("disk").ToString(), "IOError: disk");
}

TEST(LogRateLimit, OneLineAnIntervalAndACountOfTheRest) {
  LogRateLimit rl(1000000);
  EXPECT_TRUE(rl.Allow(5));
  for (uint64_t t = 6; t < 1000005; t += 1000) EXPECT_FALSE(rl.Allow(t));
  EXPECT_EQ(rl.TakeSuppressed(), 1000u);
  EXPECT_EQ(rl.TakeSuppressed(), 0u);
  EXPECT_TRUE(rl.Allow(1000005));
  EXPECT_FALSE(rl.Allow(1000006));
  EXPECT_TRUE(rl.Allow(2000006));
  EXPECT_EQ(rl.TakeSuppressed(), 1u);
}

TEST(StrUtil, StrictIntegers) {
  EXPECT_EQ(ParseInt64Strict("0"), 0);
  EXPECT_EQ(ParseInt64Strict("-12"), -12);
  EXPECT_EQ(ParseInt64Strict("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt64Strict("-9223372036854775808"), INT64_MIN);
  for (const char* bad :
       {"", "+1", " 1", "1 ", "01", "-0", "-", "9223372036854775808", "1a", "0x10", "1.0"})
    EXPECT_FALSE(ParseInt64Strict(bad).has_value()) << bad;
  EXPECT_EQ(ParseUint64Strict("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(ParseUint64Strict("18446744073709551616").has_value());
}

TEST(StrUtil, Bytes) {
  EXPECT_EQ(ParseBytes("100"), 100u);
  EXPECT_EQ(ParseBytes("1kb"), 1024u);
  EXPECT_EQ(ParseBytes("2MB"), 2u << 20);
  EXPECT_EQ(ParseBytes("3gb"), 3ull << 30);
  EXPECT_EQ(ParseBytes("1k"), 1000u);
  EXPECT_FALSE(ParseBytes("kb").has_value());
  EXPECT_FALSE(ParseBytes("-1").has_value());
}

TEST(StrUtil, Glob) {
  EXPECT_TRUE(GlobMatch("*", "maxmemory", true));
  EXPECT_TRUE(GlobMatch("max*", "maxmemory", true));
  EXPECT_TRUE(GlobMatch("MAX?EMORY", "maxmemory", true));
  EXPECT_FALSE(GlobMatch("max", "maxmemory", true));
  EXPECT_TRUE(GlobMatch("a[bc]d", "acd", false));
  EXPECT_FALSE(GlobMatch("a[^bc]d", "acd", false));
}

TEST(StrUtil, GlobEdgeCasesAsRedis) {
  // A range takes three bytes whatever they are: in "[b-]c]" the ']' ends the range
  // b..']', not the class, which goes on to 'c' and the next ']' (as in Redis).
  EXPECT_TRUE(GlobMatch("a[b-]c]", "a]", false));
  EXPECT_TRUE(GlobMatch("a[b-]c]", "ac", false));
  EXPECT_FALSE(GlobMatch("a[b-]c]", "a]c", false));
  EXPECT_TRUE(GlobMatch("a[bc", "ab", false));  // an unterminated class ends the pattern
  EXPECT_TRUE(GlobMatch("a\\", "a\\", false));  // a trailing backslash is itself
  EXPECT_TRUE(GlobMatch("\\*x", "*x", false));
  EXPECT_FALSE(GlobMatch("\\*x", "ax", false));
  EXPECT_TRUE(GlobMatch("[\\]]", "]", false));
  EXPECT_TRUE(GlobMatch("**", "", false));
  EXPECT_FALSE(GlobMatch("?", "", false));
  EXPECT_TRUE(GlobMatch("h*llo*", "HELLO world", true));
  EXPECT_FALSE(GlobMatch("h*llo*", "HELLO world", false));
}

// Redis' "Regression for pattern matching long nested loops" (CVE-2022-36021): a
// pattern of many stars that cannot match must cost a product of the lengths, not an
// exponential. Counted in matcher steps, not seconds.
TEST(StrUtil, GlobStarsCostAtMostTheProductOfTheLengths) {
  std::string key(40, 'a');
  for (int stars : {10, 20, 40}) {
    std::string pat;
    for (int i = 0; i < stars; ++i) pat += "a*";
    pat += 'b';
    uint64_t steps = 0;
    EXPECT_FALSE(GlobMatch(pat, key, false, &steps));
    EXPECT_LE(steps, (pat.size() + 1) * (key.size() + 1)) << stars << " stars";
  }
  std::string pat = "*";
  for (int i = 0; i < 1000; ++i) pat += "?*";
  uint64_t steps = 0;
  EXPECT_FALSE(GlobMatch(pat, std::string(500, 'x'), false, &steps));
  EXPECT_LE(steps, (pat.size() + 1) * 501u);
}

// Redis' stringmatchlen gives up past 1000 nested stars; a trailing star and
// runs of stars count once.
TEST(StrUtil, GlobRefusesMoreThan1000NestedStars) {
  std::string rep1000, rep1001;
  for (int i = 0; i < 1000; ++i) rep1000 += "*?";
  rep1001 = rep1000 + "*?";
  EXPECT_TRUE(GlobMatch(rep1000, std::string(1000, 'a'), false));
  EXPECT_FALSE(GlobMatch(rep1001, std::string(1001, 'a'), false));
  EXPECT_FALSE(GlobMatch(rep1001, std::string(5000, 'a'), false));
  EXPECT_TRUE(GlobMatch(rep1000 + "*", std::string(1001, 'a'), false));  // trailing star
  EXPECT_TRUE(GlobMatch(std::string(5000, '*'), "abc", false));          // one group
  std::string doubled;
  for (int i = 0; i < 1000; ++i) doubled += "**?";
  EXPECT_TRUE(GlobMatch(doubled, std::string(1000, 'a'), false));
  std::string escaped;
  for (int i = 0; i < 1001; ++i) escaped += "\\*?";  // literal stars: no nesting
  std::string text;
  for (int i = 0; i < 1001; ++i) text += "*a";
  EXPECT_TRUE(GlobMatch(escaped, text, false));
}

TEST(StrUtil, GlobAgreesWithTheReferenceMatcher) {
  std::mt19937 rng(1974);
  const char kPat[] = "ab*?[]^-\\A";
  const char kStr[] = "abAB]-^\\*?";
  for (int round = 0; round < 200000; ++round) {
    std::string p, s;
    size_t pl = rng() % 9, sl = rng() % 9;
    for (size_t i = 0; i < pl; ++i) p += kPat[rng() % (sizeof(kPat) - 1)];
    for (size_t i = 0; i < sl; ++i) s += kStr[rng() % (sizeof(kStr) - 1)];
    for (bool nocase : {false, true}) {
      ASSERT_EQ(GlobMatch(p, s, nocase), testing::GlobReference(p, s, nocase))
          << "pattern '" << p << "' string '" << s << "' nocase " << nocase;
    }
  }
}

TEST(StrUtil, ReprEscapesAsRedisDoes) {
  std::string q, u;
  AppendRepr(&q, std::string_view("a\"b\\c\r\n\t\x01\xff", 10));
  EXPECT_EQ(q, "\"a\\\"b\\\\c\\r\\n\\t\\x01\\xff\"");
  AppendRepr(&u, std::string_view("a\"b\\c\r\n\t\x01\xff", 10), /*quoted=*/false);
  EXPECT_EQ(u, "a\"b\\\\c\\r\\n\\t\\x01\\xff");
  std::string plain;
  AppendRepr(&plain, "tenant|chat:42", false);
  EXPECT_EQ(plain, "tenant|chat:42");  // printable ASCII reads unchanged
}

// The shared pool under the background runner and the compute pool.
TEST(ThreadPool, RunsTasksInOrderAndDrainsOnStop) {
  base::ThreadPool pool(1, "t-pool");
  EXPECT_FALSE(pool.Post([] {}));  // not started
  pool.Start();
  EXPECT_EQ(pool.threads(), 1u);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<int> order;
  // The first task holds the only thread, so the next ones queue behind it.
  ASSERT_TRUE(pool.Post([&] {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return release; });
  }));
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(pool.Post([&, i] {
      std::lock_guard<std::mutex> l(mu);
      order.push_back(i);
    }));
  ASSERT_TRUE(pool.PostFront([&] {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(-1);
  }));
  EXPECT_EQ(pool.pending(), 5u);
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  pool.Stop();  // runs what is queued, then joins
  EXPECT_EQ(order, (std::vector<int>{-1, 0, 1, 2}));
  EXPECT_EQ(pool.pending(), 0u);
  EXPECT_FALSE(pool.Post([] {}));
  EXPECT_FALSE(pool.PostFront([] {}));
  pool.Stop();  // idempotent
}

TEST(ThreadPool, TasksMayPostMoreToTheirPool) {
  base::ThreadPool pool(3, "t-pool");
  pool.Start();
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  auto count = [&] {
    std::lock_guard<std::mutex> l(mu);
    if (++done == 60) cv.notify_all();
  };
  for (int i = 0; i < 30; ++i)
    ASSERT_TRUE(pool.Post([&] {
      EXPECT_TRUE(pool.Post(count));  // a task may queue more work on its own pool
      count();
    }));
  {
    std::unique_lock<std::mutex> l(mu);
    EXPECT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return done == 60; }));
  }
  pool.Stop();
  EXPECT_EQ(done, 60);
}

// A background pool's threads run SCHED_BATCH, kBackgroundNice nice levels
// below the thread that started them (at most 19); a normal pool's as that thread.
TEST(ThreadPool, BackgroundThreadsGiveWayToTheirCreator) {
  errno = 0;
  const int mine = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  ASSERT_EQ(errno, 0);
  const int my_policy = sched_getscheduler(0);
  for (auto priority : {base::ThreadPriority::kNormal, base::ThreadPriority::kBackground}) {
    base::ThreadPool pool(2, "t-prio", priority);
    pool.Start();
    std::promise<std::pair<int, int>> seen;
    ASSERT_TRUE(pool.Post([&] {
      seen.set_value(
          {sched_getscheduler(0), getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()))});
    }));
    auto [policy, nice] = seen.get_future().get();
    pool.Stop();
    if (priority == base::ThreadPriority::kNormal) {
      EXPECT_EQ(policy, my_policy);
      EXPECT_EQ(nice, mine);
    } else {
      EXPECT_EQ(policy, SCHED_BATCH);
      EXPECT_EQ(nice, std::min(19, mine + base::kBackgroundNice));
    }
  }
}

// base::Mutex / MutexLock / CondVar (base/mutex.h): a waiter woken by another
// thread sees what it wrote under the lock; a lock given up with Unlock() can
// be taken by another thread and is held again after Lock(); a timed wait with
// nothing signalled returns false, at its deadline.
TEST(Mutex, CondVarHandsOverAndLockRelocks) {
  base::Mutex mu;
  base::CondVar cv;
  int value = 0;
  std::thread t([&] {
    base::MutexLock l(&mu);
    value = 1;
    cv.SignalAll();
  });
  {
    base::MutexLock l(&mu);
    while (value == 0) cv.Wait(mu);
    EXPECT_EQ(value, 1);
    l.Unlock();
    EXPECT_TRUE(mu.TryLock());  // nobody holds it now
    mu.Unlock();
    l.Lock();
    EXPECT_FALSE(std::async(std::launch::async, [&] {
                   bool got = mu.TryLock();
                   if (got) mu.Unlock();
                   return got;
                 }).get());  // held again
  }
  t.join();
  // Nothing signals: the timed wait returns false once its deadline passed (a
  // spurious wake-up returns true early, so loop until it reports the timeout).
  base::MutexLock l(&mu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  while (cv.WaitUntil(mu, deadline)) {
  }
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 test vectors.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c::Value(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c::Value(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c::Value(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xE3069283u);
}

TEST(Crc32c, HardwareMatchesPortable) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(4099);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 9; ++off)
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 1000u, 4090u}) {
      EXPECT_EQ(crc32c::Value(buf.data() + off, n), crc32c::ExtendPortable(0, buf.data() + off, n));
      uint32_t part = crc32c::Extend(crc32c::Value(buf.data() + off, n / 2),
                                     buf.data() + off + n / 2, n - n / 2);
      EXPECT_EQ(part, crc32c::Value(buf.data() + off, n));
    }
}

// Lengths past the three-stripe threshold (3 x 4 KiB), at odd offsets and split
// at odd points, match the table reference.
TEST(Crc32c, InterleavedStripesMatchPortable) {
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(100000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off : {0u, 1u, 5u})
    for (size_t n : {12287u, 12288u, 12289u, 24576u, 40000u, 99990u}) {
      const uint8_t* p = buf.data() + off;
      uint32_t want = crc32c::ExtendPortable(0, p, n);
      EXPECT_EQ(crc32c::Value(p, n), want) << off << " " << n;
      uint32_t part = crc32c::Extend(crc32c::Value(p, 777), p + 777, n - 777);
      EXPECT_EQ(part, want) << off << " " << n;
      EXPECT_EQ(crc32c::Extend(0x12345678u, p, n), crc32c::ExtendPortable(0x12345678u, p, n));
    }
}

// The VPCLMULQDQ fold (runs >= 512 bytes, where the CPU has it) and, with the
// optional features turned off, the crc32-instruction path it falls back to,
// both match the table reference: lengths around the fold's 256-byte step and
// its 16-byte tail, odd offsets, a running value and splits at odd points.
TEST(Crc32c, FoldAndFallbackMatchPortable) {
  std::mt19937 rng(13);
  std::vector<uint8_t> buf(300000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  // 0: the CPU's own path; 1: AVX-512 off (PION_CPU_DISABLE=avx512, what an
  // AVX2-only CPU runs); 2: every optional feature off.
  unsigned avx512_off = 0;
  ASSERT_TRUE(ParseCpuDisable("avx512", &avx512_off));
  for (int disable : {0, 1, 2}) {
    TEST_SetCpuFeaturesOff(disable == 1 ? avx512_off : 0);
    TEST_DisableCpuFeatures(disable == 2);
    if (disable == 1) {
      EXPECT_FALSE(CpuHas(CpuFeature::kVpclmul));
      EXPECT_FALSE(CpuHas(CpuFeature::kAvx512f));
    }
    for (size_t off : {0u, 1u, 3u, 8u, 63u})
      for (size_t n : {511u, 512u, 513u, 527u, 528u, 767u, 768u, 1024u, 4097u, 12345u, 65536u,
                       262144u + 17u}) {
        const uint8_t* p = buf.data() + off;
        const uint32_t want = crc32c::ExtendPortable(0, p, n);
        EXPECT_EQ(crc32c::Value(p, n), want) << disable << " " << off << " " << n;
        EXPECT_EQ(crc32c::Extend(0xDEADBEEFu, p, n), crc32c::ExtendPortable(0xDEADBEEFu, p, n))
            << disable << " " << off << " " << n;
        const size_t cut = n / 3 + 1;
        EXPECT_EQ(crc32c::Extend(crc32c::Value(p, cut), p + cut, n - cut), want)
            << disable << " " << off << " " << n;
      }
  }
  TEST_DisableCpuFeatures(false);
  TEST_SetCpuFeaturesOff(0);
  // The zeros' known value (RFC 3720 B.4 extended: 32 zero bytes) through the fold.
  std::vector<uint8_t> zeros(4096, 0);
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()),
            crc32c::ExtendPortable(0, zeros.data(), 4096));
}

// Random lengths and alignments through the default path and with AVX-512
// off, against the table reference.
TEST(Crc32c, RandomRunsMatchPortable) {
  std::mt19937 rng(29);
  std::vector<uint8_t> buf(1 << 20);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  unsigned avx512_off = 0;
  ASSERT_TRUE(ParseCpuDisable("avx512", &avx512_off));
  for (unsigned off_mask : {0u, avx512_off}) {
    TEST_SetCpuFeaturesOff(off_mask);
    for (int i = 0; i < 300; ++i) {
      const size_t off = rng() % 64;
      const size_t n = rng() % (i < 150 ? 4096 : buf.size() - 64);
      const uint8_t* p = buf.data() + off;
      const uint32_t seed = static_cast<uint32_t>(rng());
      EXPECT_EQ(crc32c::Extend(seed, p, n), crc32c::ExtendPortable(seed, p, n))
          << off_mask << " " << off << " " << n;
    }
  }
  TEST_SetCpuFeaturesOff(0);
}

TEST(Cpu, ParseCpuDisable) {
  unsigned m = 1;
  EXPECT_TRUE(ParseCpuDisable("", &m));
  EXPECT_EQ(m, 0u);
  auto bit = [](CpuFeature f) { return 1u << static_cast<unsigned>(f); };
  EXPECT_TRUE(ParseCpuDisable("avx512", &m));
  EXPECT_EQ(m, bit(CpuFeature::kAvx512f) | bit(CpuFeature::kVpclmul));
  EXPECT_TRUE(ParseCpuDisable(" avx2 , fma", &m));
  EXPECT_EQ(m, bit(CpuFeature::kAvx2) | bit(CpuFeature::kFma));
  EXPECT_FALSE(ParseCpuDisable("avx2,bogus", &m));
  EXPECT_EQ(m, bit(CpuFeature::kAvx2));
  EXPECT_TRUE(ParseCpuDisable("all", &m));
  EXPECT_EQ(m & bit(CpuFeature::kSse42), 0u);
  EXPECT_NE(m & bit(CpuFeature::kVpclmul), 0u);
  // What the test hook turns off, CpuHas no longer reports.
  TEST_SetCpuFeaturesOff(bit(CpuFeature::kAvx2));
  EXPECT_FALSE(CpuHas(CpuFeature::kAvx2));
  TEST_SetCpuFeaturesOff(0);
}

TEST(Fp16, RoundTripAllHalves) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF);
    if (nan) {
      EXPECT_TRUE(f != f);
      continue;
    }
    EXPECT_EQ(F32ToF16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);
  EXPECT_EQ(F32ToF16(1.0f + 1.0f / 2048), 0x3C00);        // tie -> even
  EXPECT_EQ(F32ToF16(1.0f + 3.0f / 2048), 0x3C02);        // tie -> even (up)
  EXPECT_EQ(F32ToF16(5.960464477539063e-08f), 0x0001);    // 2^-24
  EXPECT_EQ(F32ToF16(2.98023223876953125e-08f), 0x0000);  // 2^-25 tie -> 0
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
}

// A writer waiting behind a reader keeps later readers out (glibc's default
// rwlock, std::shared_mutex, lets them in: readers that keep overlapping would
// starve it), and gets the lock as soon as that reader leaves.
TEST(WriterFirstMutex, AWaitingWriterHoldsOffNewReaders) {
  WriterFirstMutex m;
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, release = false;
  std::thread reader([&] {
    std::shared_lock<WriterFirstMutex> r(m);
    std::unique_lock<std::mutex> l(mu);
    held = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return held; });
  }
  std::atomic<bool> wrote{false};
  std::thread writer([&] {
    std::unique_lock<WriterFirstMutex> w(m);
    wrote = true;
  });
  // New readers get in until the writer queues; then they are refused.
  bool refused = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    if (m.try_lock_shared()) {
      m.unlock_shared();
      std::this_thread::yield();
    } else {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "a reader got in past a waiting writer for 20 s";
  EXPECT_FALSE(wrote.load()) << "the writer got in while a reader held the lock";
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  reader.join();
  writer.join();
  EXPECT_TRUE(wrote.load());
  EXPECT_TRUE(m.try_lock_shared());
  m.unlock_shared();
}

}  // namespace
}  // namespace pion
