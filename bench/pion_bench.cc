// pion-bench: a load generator for what redis-benchmark cannot express
// (binary-payload V.* commands, block-hash membership probes), speaking RESP
// over blocking loopback sockets, one thread per client connection.
//
// Each client sends `pipeline` requests with one writev, then reads and checks
// their replies; a request's latency runs from the start of that write to the
// moment its reply is parsed (as redis-benchmark measures with -P). Payloads are
// deterministic; every reply is validated (type, length, sampled content) and
// any mismatch or error reply is fatal (exit 1). The result is one JSON line.
//
// Workloads: storebatch, fetch (pion); set, get (redis-server, the same bytes);
// lookup, membership, membership_miss (the same request, unknown namespace),
// ping (either); memcpy (no server: a copy-bandwidth probe).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_io.h"

namespace pion::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 1974;
  std::string workload = "ping";
  int clients = 1;
  int pipeline = 1;
  uint64_t payload = 65536;  // bytes on the wire per request (store/fetch/set/get)
  double duration_s = 2.0;
  uint64_t max_requests = 0;  // per client; 0 = until duration
  int warmup = 2;             // untimed batches per client
  std::string ns = "bench";   // namespace / key prefix; client i uses <ns>_c<i>
  uint32_t kv_dim = 1024;
  std::string vquant = "fp16";
  std::string in_fmt = "F16";      // V.STOREBATCH FMT (F16|F32)
  std::string out_fmt = "NATIVE";  // V.FETCH FMT (NATIVE|F32|F16)
  uint32_t hashes = 1562;          // membership: N registered
  uint32_t probes = 1562;          // membership: K probed
  bool no_setup = false;
  bool full_verify = false;
  uint64_t keys = 0;   // get: a random key of key:000000000000..key:<keys-1> (12 digits)
  bool fresh = false;  // storebatch: every request registers a new namespace and stores into it
};

void Usage() {
  std::fprintf(stderr,
               "usage: pion-bench [--host H] [--port P] --workload "
               "storebatch|fetch|set|get|lookup|membership|membership_miss|ping|memcpy\n"
               "  [--clients N] [--pipeline D] [--payload BYTES] [--duration S]\n"
               "  [--requests N per client] [--warmup BATCHES] [--ns NAME] [--kv-dim D]\n"
               "  [--vquant fp16|int8|fp8|mlx4g32|turbo4|turbo3|turbo2] [--in-fmt F16|F32]\n"
               "  [--out-fmt NATIVE|F32|F16] [--hashes N] [--probes K] [--no-setup]\n"
               "  [--full-verify] [--keys N (get: random keys key:%%012d below N, no setup)]\n"
               "  [--fresh (storebatch: each request REGISTERs a new namespace, then stores)]\n");
}

uint64_t ParseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) Fatal("bad size '%s'", s);
  std::string suf(end);
  for (char& c : suf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (suf == "k" || suf == "kib")
    v *= 1024;
  else if (suf == "m" || suf == "mib")
    v *= 1024 * 1024;
  else if (suf == "g" || suf == "gib")
    v *= 1024.0 * 1024 * 1024;
  else if (!suf.empty() && suf != "b")
    Fatal("bad size suffix '%s'", s);
  return static_cast<uint64_t>(v);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) Fatal("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--host")
      o.host = val();
    else if (a == "--port")
      o.port = std::atoi(val());
    else if (a == "--workload")
      o.workload = val();
    else if (a == "--clients")
      o.clients = std::atoi(val());
    else if (a == "--pipeline")
      o.pipeline = std::atoi(val());
    else if (a == "--payload")
      o.payload = ParseSize(val());
    else if (a == "--duration")
      o.duration_s = std::atof(val());
    else if (a == "--requests")
      o.max_requests = ParseSize(val());
    else if (a == "--warmup")
      o.warmup = std::atoi(val());
    else if (a == "--ns")
      o.ns = val();
    else if (a == "--kv-dim")
      o.kv_dim = static_cast<uint32_t>(std::atoi(val()));
    else if (a == "--vquant")
      o.vquant = val();
    else if (a == "--in-fmt")
      o.in_fmt = val();
    else if (a == "--out-fmt")
      o.out_fmt = val();
    else if (a == "--hashes")
      o.hashes = static_cast<uint32_t>(std::atoi(val()));
    else if (a == "--probes")
      o.probes = static_cast<uint32_t>(std::atoi(val()));
    else if (a == "--no-setup")
      o.no_setup = true;
    else if (a == "--full-verify")
      o.full_verify = true;
    else if (a == "--keys")
      o.keys = ParseSize(val());
    else if (a == "--fresh")
      o.fresh = true;
    else if (a == "-h" || a == "--help") {
      Usage();
      std::exit(0);
    } else {
      Usage();
      Fatal("unknown argument '%s'", a.c_str());
    }
  }
  if (o.clients < 1 || o.clients > 1024) Fatal("--clients must be 1..1024");
  if (o.pipeline < 1 || o.pipeline > 4096) Fatal("--pipeline must be 1..4096");
  if (o.kv_dim < 1) Fatal("--kv-dim must be >= 1");
  for (char& c : o.in_fmt) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (char& c : o.out_fmt) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (o.in_fmt != "F16" && o.in_fmt != "F32") Fatal("--in-fmt must be F16 or F32");
  if (o.out_fmt != "NATIVE" && o.out_fmt != "F16" && o.out_fmt != "F32")
    Fatal("--out-fmt must be NATIVE, F16 or F32");
  if (o.keys > 0 && o.workload != "get") Fatal("--keys is for --workload get");
  if (o.fresh && o.workload != "storebatch") Fatal("--fresh is for --workload storebatch");
  if (o.keys > 0) o.no_setup = true;  // the keys are there already
  return o;
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// fp16 bits of a finite value in [-1, 1) (exactly representable round trip)
// from 16 random bits.
uint16_t HalfBits(uint64_t r) {
  // sign | exponent 1..14 (never inf/nan/subnormal) | mantissa
  uint16_t sign = static_cast<uint16_t>((r >> 15) & 1) << 15;
  uint16_t exp = static_cast<uint16_t>(1 + ((r >> 10) & 0x1f) % 14) << 10;
  uint16_t man = static_cast<uint16_t>(r & 0x3ff);
  return sign | exp | man;
}

// Deterministic payload: fp16 or f32 values (finite, |v| < 1) so quantized
// formats accept them; for SET/GET the same bytes as for F16 rows. One SplitMix64
// draw makes four halves (or two floats): generating 8 x 16 MiB values was ~18 %
// of the load generator's CPU in a 3 s run, and run.py counts the whole process.
Bytes MakePayload(uint64_t bytes, bool f32, uint64_t seed) {
  Bytes out(bytes);
  uint64_t st = seed;
  if (f32) {
    for (uint64_t i = 0; i + 4 <= bytes; i += 8) {
      uint64_t r = SplitMix64(&st);
      for (int k = 0; k < 2 && i + 4 * k + 4 <= bytes; ++k) {
        uint32_t h = static_cast<uint32_t>(r >> (32 * k));
        float v = static_cast<float>(static_cast<int32_t>(h % 2000001) - 1000000) * 1e-6f;
        std::memcpy(&out[i + 4 * k], &v, 4);
      }
    }
  } else {
    for (uint64_t i = 0; i + 2 <= bytes; i += 8) {
      uint64_t r = SplitMix64(&st);
      for (int k = 0; k < 4 && i + 2 * k + 2 <= bytes; ++k) {
        uint16_t h = HalfBits(r >> (16 * k));
        std::memcpy(&out[i + 2 * k], &h, 2);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- workloads

enum class Expect { kStatus, kBulk, kBulkExact };

struct Work {
  Command cmd;
  Expect expect = Expect::kStatus;
  std::string status;           // for kStatus: "OK", "HIT", "PONG"
  uint64_t bulk_len = 0;        // for kBulk / kBulkExact
  const Bytes* want = nullptr;  // bytes to compare (sampled or full)
  uint64_t payload = 0;         // payload bytes moved per request
};

size_t RowBytes(const std::string& fmt, uint32_t dim) {
  return fmt == "F32" ? 4ull * dim : 2ull * dim;
}

void CheckReply(const Reply& r, const Bytes& body, const Work& w, bool full) {
  if (r.type == '-') Fatal("error reply: -%s", r.line.c_str());
  switch (w.expect) {
    case Expect::kStatus:
      if (r.type != '+' || r.line != w.status)
        Fatal("unexpected reply '%c%s' (want +%s)", r.type, r.line.c_str(), w.status.c_str());
      return;
    case Expect::kBulk:
    case Expect::kBulkExact: {
      if (r.type != '$')
        Fatal("unexpected reply type '%c%s' (want a bulk of %" PRIu64 " bytes)", r.type,
              r.line.c_str(), w.bulk_len);
      if (static_cast<uint64_t>(r.len) != w.bulk_len)
        Fatal("wrong reply length %" PRId64 " (want %" PRIu64 ")", r.len, w.bulk_len);
      if (w.want == nullptr) return;
      const Bytes& want = *w.want;
      if (w.expect == Expect::kBulkExact || full) {
        if (std::memcmp(body.data(), want.data(), body.size()) != 0) {
          size_t i = 0;
          while (body[i] == want[i]) ++i;
          Fatal("reply content differs at byte %zu (got 0x%02x want 0x%02x)", i, body[i], want[i]);
        }
        return;
      }
      // Sampled check: 64 bytes at the start, the middle and the end.
      size_t n = body.size();
      size_t spots[3] = {0, n / 2, n > 64 ? n - 64 : 0};
      for (size_t s : spots) {
        size_t k = std::min<size_t>(64, n - s);
        if (std::memcmp(body.data() + s, want.data() + s, k) != 0)
          Fatal("reply content differs near byte %zu", s);
      }
      return;
    }
  }
}

// Synchronous helper for setup: one command, one checked reply.
Reply Call(Conn& c, Command cmd, Bytes* body) {
  std::vector<iovec> iov;
  cmd.AppendIov(&iov);
  c.WriteAll(iov);
  return ReadReply(c, body);
}

void CallExpect(Conn& c, Command cmd, const char* status, const char* what) {
  Bytes body;
  Reply r = Call(c, std::move(cmd), &body);
  if (r.type != '+' || r.line != status)
    Fatal("setup %s: unexpected reply '%c%s' (want +%s)", what, r.type, r.line.c_str(), status);
}

Command Cmd(std::initializer_list<std::string> args) {
  Command c;
  for (const std::string& a : args) c.Arg(a);
  return c;
}

struct Shared {
  Options opt;
  // Per client: payload and expected data.
  std::vector<Bytes> payloads;
  Bytes membership_blob;  // K probes
  Bytes membership_want;  // expected bitmap
  Bytes hash_table_blob;  // N registered
};

std::string ClientNs(const Options& o, int i) { return o.ns + "_c" + std::to_string(i); }

uint64_t RowsFor(const Options& o) {
  uint64_t rb = RowBytes(o.in_fmt, o.kv_dim);
  if (o.payload < rb || o.payload % rb != 0)
    Fatal("--payload %" PRIu64 " is not a multiple of the row size %" PRIu64
          " (kv_dim %u, %s input)",
          o.payload, rb, o.kv_dim, o.in_fmt.c_str());
  return o.payload / rb;
}

// Bytes of a V.FETCH reply of `rows` rows for this vquant and output format.
uint64_t FetchBytes(const Options& o, uint64_t rows) {
  bool fp16 = o.vquant == "fp16" || o.vquant == "FP16";
  uint64_t elem = (o.out_fmt == "F16" || (o.out_fmt == "NATIVE" && fp16)) ? 2 : 4;
  return rows * o.kv_dim * elem;
}

void Setup(Shared& s) {
  const Options& o = s.opt;
  const std::string& w = o.workload;
  bool f32 = o.in_fmt == "F32";
  if (w == "storebatch" || w == "fetch" || w == "set" || w == "get") {
    for (int i = 0; i < o.clients; ++i)
      s.payloads.push_back(MakePayload(o.payload, f32 && (w == "storebatch" || w == "fetch"),
                                       0x5eed0000ull + static_cast<uint64_t>(i)));
  }
  if (w == "membership" || w == "membership_miss") {
    uint64_t st = 42;
    std::vector<uint64_t> table(o.hashes);
    for (auto& h : table) h = SplitMix64(&st);
    s.hash_table_blob.resize(8ull * o.hashes);
    std::memcpy(s.hash_table_blob.data(), table.data(), s.hash_table_blob.size());
    // Probes: alternately a registered hash (from a shuffled position) and an
    // absent one, so the bitmap is half ones.
    s.membership_blob.resize(8ull * o.probes);
    s.membership_want.assign((o.probes + 7) / 8, 0);
    uint64_t pst = 7;
    for (uint32_t i = 0; i < o.probes; ++i) {
      uint64_t h;
      if (i % 2 == 0 && o.hashes > 0) {
        h = table[SplitMix64(&pst) % o.hashes];
        s.membership_want[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      } else {
        h = SplitMix64(&pst) | 1ull;  // odd stream: collision chance ~2^-64
        for (uint64_t t : table)
          if (t == h) s.membership_want[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      }
      std::memcpy(&s.membership_blob[8ull * i], &h, 8);
    }
  }
  if (o.no_setup || w == "memcpy" || w == "ping" || w == "membership_miss") return;

  Conn c;
  c.Connect(o.host, o.port);
  Bytes body;
  for (int i = 0; i < o.clients; ++i) {
    std::string ns = ClientNs(o, i);
    if (w == "storebatch" || w == "fetch" || w == "lookup") {
      CallExpect(c, Cmd({"KV.PREFIX.REGISTER", ns, std::to_string(o.kv_dim), o.vquant}), "OK",
                 "KV.PREFIX.REGISTER");
    }
    if (w == "fetch") {
      Command st = Cmd({"V.STOREBATCH", ns + "_pk", "0", "0", std::to_string(RowsFor(o))});
      st.Blob(s.payloads[i].data(), s.payloads[i].size());
      st.Arg("FMT");
      st.Arg(o.in_fmt);
      CallExpect(c, std::move(st), "OK", "V.STOREBATCH");
    }
    if (w == "lookup") {
      // One row on each side so LOOKUP answers +HIT.
      Bytes row = MakePayload(2ull * o.kv_dim, false, 1);
      for (const char* side : {"_pk", "_pv"}) {
        Command st = Cmd({"V.STOREBATCH", ns + side, "0", "0", "1"});
        st.Blob(row.data(), row.size());
        st.Arg("FMT");
        st.Arg("F16");
        CallExpect(c, std::move(st), "OK", "V.STOREBATCH");
      }
    }
    if (w == "get") {
      Command st = Cmd({"SET", ns});
      st.Blob(s.payloads[i].data(), s.payloads[i].size());
      CallExpect(c, std::move(st), "OK", "SET");
    }
    if (w == "membership") {
      Command reg = Cmd({"KV.PREFIX.REGISTER", ns, std::to_string(o.kv_dim), o.vquant, "BLOCKS",
                         "16", std::to_string(o.hashes)});
      reg.Blob(s.hash_table_blob.data(), s.hash_table_blob.size());
      CallExpect(c, std::move(reg), "OK", "KV.PREFIX.REGISTER BLOCKS");
    }
  }
}

Work MakeWork(const Shared& s, int client) {
  const Options& o = s.opt;
  const std::string& w = o.workload;
  std::string ns = ClientNs(o, client);
  Work k;
  if (w == "ping") {
    k.cmd = Cmd({"PING"});
    k.status = "PONG";
  } else if (w == "set") {
    k.cmd = Cmd({"SET", ns});
    k.cmd.Blob(s.payloads[client].data(), s.payloads[client].size());
    k.status = "OK";
    k.payload = o.payload;
  } else if (w == "get") {
    k.cmd = Cmd({"GET", ns});
    k.expect = Expect::kBulk;
    k.bulk_len = o.payload;
    k.want = o.keys > 0 ? nullptr : &s.payloads[client];  // --keys: values set by others
    k.payload = o.payload;
  } else if (w == "storebatch") {
    k.cmd = Cmd({"V.STOREBATCH", ns + "_pk", "0", "0", std::to_string(RowsFor(o))});
    k.cmd.Blob(s.payloads[client].data(), s.payloads[client].size());
    k.cmd.Arg("FMT");
    k.cmd.Arg(o.in_fmt);
    k.status = "OK";
    k.payload = o.payload;
  } else if (w == "fetch") {
    uint64_t rows = RowsFor(o);
    k.cmd = Cmd({"V.FETCH", ns + "_pk", "0", "RANGE", "0", std::to_string(rows), "FMT", o.out_fmt});
    k.expect = Expect::kBulk;
    k.bulk_len = FetchBytes(o, rows);
    bool fp16 = o.vquant == "fp16" || o.vquant == "FP16";
    // Stored fp16 rows from F16 input come back bit-exact with NATIVE or F16.
    if (fp16 && o.in_fmt == "F16" && o.out_fmt != "F32") k.want = &s.payloads[client];
    k.payload = k.bulk_len;
  } else if (w == "lookup") {
    k.cmd = Cmd({"KV.PREFIX.LOOKUP", ns});
    k.status = "HIT";
  } else if (w == "membership_miss") {
    // The same request against a namespace never registered: +UNKNOWN after
    // parsing, no search. membership minus this = the server's search time.
    k.cmd = Cmd({"KV.PREFIX.MEMBERSHIP", ns + "_unregistered", std::to_string(o.probes)});
    k.cmd.Blob(s.membership_blob.data(), s.membership_blob.size());
    k.status = "UNKNOWN";
    k.payload = s.membership_blob.size();
  } else if (w == "membership") {
    k.cmd = Cmd({"KV.PREFIX.MEMBERSHIP", ns, std::to_string(o.probes)});
    k.cmd.Blob(s.membership_blob.data(), s.membership_blob.size());
    k.expect = Expect::kBulkExact;
    k.bulk_len = s.membership_want.size();
    k.want = &s.membership_want;
    k.payload = s.membership_blob.size();
  } else {
    Fatal("unknown workload '%s'", w.c_str());
  }
  return k;
}

struct ClientResult {
  std::vector<float> lat_us;
  double write_us = 0;  // summed over timed batches: start of the write to its end
  uint64_t ops = 0;
  uint64_t retries = 0;  // --fresh: stores sent again (their namespace was evicted first)
  Clock::time_point end;
};

struct Control {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  Clock::time_point start;
};

void RunClient(const Shared& s, int client, Control* ctl, ClientResult* res) {
  const Options& o = s.opt;
  Work work = MakeWork(s, client);
  Conn c;
  c.Connect(o.host, o.port);
  std::vector<iovec> one;
  work.cmd.AppendIov(&one);
  std::vector<iovec> batch_tpl;
  for (int i = 0; i < o.pipeline; ++i) batch_tpl.insert(batch_tpl.end(), one.begin(), one.end());
  std::vector<iovec> iov;
  Bytes body;
  body.reserve(work.bulk_len + 2);
  // --keys / --fresh: every request is built anew (a random key; a new namespace).
  const bool per_request = o.keys > 0 || o.fresh;
  const int replies_per_request = o.fresh ? 2 : 1;
  std::vector<Command> cmds;
  cmds.reserve(2 * static_cast<size_t>(o.pipeline));  // never reallocated: iovecs point in
  uint64_t rng = 0x9e37ull * static_cast<uint64_t>(client + 1);
  uint64_t seq = 0;
  std::vector<std::string> batch_ns;  // --fresh: each request's namespace
  // --fresh: REGISTER of `ns` and the store into it, appended to cmds and iov.
  auto add_fresh = [&](const std::string& ns) {
    cmds.push_back(Cmd({"KV.PREFIX.REGISTER", ns, std::to_string(o.kv_dim), o.vquant}));
    cmds.back().AppendIov(&iov);
    Command st = Cmd({"V.STOREBATCH", ns + "_pk", "0", "0", std::to_string(RowsFor(o))});
    st.Blob(s.payloads[client].data(), s.payloads[client].size());
    st.Arg("FMT");
    st.Arg(o.in_fmt);
    cmds.push_back(std::move(st));
    cmds.back().AppendIov(&iov);
  };
  auto build = [&]() {
    cmds.clear();
    iov.clear();
    batch_ns.clear();
    for (int i = 0; i < o.pipeline; ++i) {
      if (o.keys > 0) {
        char key[32];
        std::snprintf(key, sizeof key, "key:%012llu",
                      static_cast<unsigned long long>(SplitMix64(&rng) % o.keys));
        cmds.push_back(Cmd({"GET", key}));
        cmds.back().AppendIov(&iov);
      } else {
        batch_ns.push_back(ClientNs(o, client) + "_f" + std::to_string(seq++));
        add_fresh(batch_ns.back());
      }
    }
  };
  // A new namespace may be evicted (it is empty) by another client's store
  // between its REGISTER and its own store: "session not found". The request
  // is then sent again (counted in `retries`), so every request stores its MiB.
  auto is_lost = [](const Reply& r) {
    return r.type == '-' && r.line.find("session not found") != std::string::npos;
  };
  std::vector<std::string> lost;
  auto resend_lost = [&]() {
    for (const std::string& ns : lost) {
      for (int tries = 0;; ++tries) {
        if (tries == 16) Fatal("V.STOREBATCH into %s: session not found 16 times", ns.c_str());
        cmds.clear();
        iov.clear();
        add_fresh(ns);
        c.WriteAll(iov);
        ++res->retries;
        Reply reg = ReadReply(c, &body);
        CheckReply(reg, body, work, false);
        Reply st = ReadReply(c, &body);
        if (is_lost(st)) continue;
        CheckReply(st, body, work, false);
        break;
      }
    }
    lost.clear();
  };
  auto batch = [&](bool timed) {
    if (per_request)
      build();
    else
      iov = batch_tpl;
    Clock::time_point t0 = Clock::now();
    c.WriteAll(iov);
    if (timed)
      res->write_us += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    for (int i = 0; i < o.pipeline * replies_per_request; ++i) {
      Reply r = ReadReply(c, &body);
      if (o.fresh && i % 2 == 1 && is_lost(r)) {
        lost.push_back(batch_ns[static_cast<size_t>(i / 2)]);
        continue;
      }
      CheckReply(r, body, work, o.full_verify && o.keys == 0);
      if (timed && (i + 1) % replies_per_request == 0) {
        res->lat_us.push_back(std::chrono::duration<float, std::micro>(Clock::now() - t0).count());
      }
    }
    if (!lost.empty()) resend_lost();
  };
  for (int i = 0; i < o.warmup; ++i) batch(false);
  ctl->ready.fetch_add(1);
  while (!ctl->go.load(std::memory_order_acquire)) std::this_thread::yield();
  uint64_t limit = o.max_requests;
  while (!ctl->stop.load(std::memory_order_relaxed)) {
    if (limit != 0 && res->ops >= limit) break;
    batch(true);
    res->ops += static_cast<uint64_t>(o.pipeline);
  }
  res->end = Clock::now();
}

double Percentile(const std::vector<float>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()))) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

// A copy-bandwidth probe: 64-byte aligned source and destination (same
// offsets, so glibc's rep-movsb slow path is not hit), buffers touched first.
int RunMemcpy(const Options& o) {
  size_t n = std::max<uint64_t>(o.payload, 64);
  auto alloc = [](size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) Fatal("posix_memalign failed");
    std::memset(p, 1, bytes);
    return static_cast<uint8_t*>(p);
  };
  uint8_t* src = alloc(n);
  uint8_t* dst = alloc(n);
  uint64_t iters = 0;
  std::vector<float> lat;
  Clock::time_point t0 = Clock::now();
  Clock::time_point deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  Clock::time_point now = t0;
  do {
    Clock::time_point a = Clock::now();
    std::memcpy(dst, src, n);
    asm volatile("" : : "r"(dst), "r"(src) : "memory");
    now = Clock::now();
    lat.push_back(std::chrono::duration<float, std::micro>(now - a).count());
    ++iters;
  } while (now < deadline && (o.max_requests == 0 || iters < o.max_requests));
  double secs = std::chrono::duration<double>(now - t0).count();
  std::sort(lat.begin(), lat.end());
  std::printf("{\"workload\":\"memcpy\",\"payload\":%zu,\"ops\":%" PRIu64
              ",\"seconds\":%.6f,\"ops_per_s\":%.3f,\"bytes_per_s\":%.1f,\"p50_us\":%.3f,"
              "\"p99_us\":%.3f,\"p999_us\":%.3f,\"errors\":0}\n",
              n, iters, secs, iters / secs, static_cast<double>(n) * iters / secs,
              Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 0.999));
  std::free(src);
  std::free(dst);
  return 0;
}

int Main(int argc, char** argv) {
  Shared s;
  s.opt = ParseArgs(argc, argv);
  const Options& o = s.opt;
  if (o.workload == "memcpy") return RunMemcpy(o);
  if (o.workload == "storebatch" || o.workload == "fetch") RowsFor(o);  // validates sizes
  Setup(s);

  Control ctl;
  std::vector<ClientResult> results(o.clients);
  std::vector<std::thread> threads;
  threads.reserve(o.clients);
  for (int i = 0; i < o.clients; ++i)
    threads.emplace_back(RunClient, std::cref(s), i, &ctl, &results[i]);
  while (ctl.ready.load() < o.clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The load generator's own cost over the timed phase only (payload generation
  // and setup excluded), for CPU-seconds per GB and page faults per request.
  rusage ru0{}, ru1{};
  ::getrusage(RUSAGE_SELF, &ru0);
  ctl.start = Clock::now();
  ctl.go.store(true, std::memory_order_release);
  if (o.max_requests == 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.duration_s));
    ctl.stop.store(true);
  }
  for (auto& t : threads) t.join();
  ::getrusage(RUSAGE_SELF, &ru1);
  auto tv_s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  const double cpu_s =
      tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
  const long faults = ru1.ru_minflt - ru0.ru_minflt + ru1.ru_majflt - ru0.ru_majflt;
  double write_us = 0;

  uint64_t ops = 0, retries = 0;
  Clock::time_point end = ctl.start;
  std::vector<float> lat;
  for (ClientResult& r : results) {
    ops += r.ops;
    retries += r.retries;
    write_us += r.write_us;
    end = std::max(end, r.end);
    lat.insert(lat.end(), r.lat_us.begin(), r.lat_us.end());
  }
  std::sort(lat.begin(), lat.end());
  double secs = std::chrono::duration<double>(end - ctl.start).count();
  Work w = MakeWork(s, 0);
  double mean = 0;
  for (float x : lat) mean += x;
  mean = lat.empty() ? 0 : mean / static_cast<double>(lat.size());
  std::printf(
      "{\"workload\":\"%s\",\"clients\":%d,\"pipeline\":%d,\"payload\":%" PRIu64
      ",\"kv_dim\":%u,\"vquant\":\"%s\",\"in_fmt\":\"%s\",\"out_fmt\":\"%s\",\"probes\":%u,"
      "\"hashes\":%u,\"ops\":%" PRIu64
      ",\"seconds\":%.6f,\"ops_per_s\":%.3f,\"bytes_per_s\":%.1f,\"mean_us\":%.3f,"
      "\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":%.3f,"
      "\"write_mean_us\":%.3f,\"client_cpu_s\":%.4f,\"client_faults\":%ld,\"retries\":%" PRIu64
      ",\"errors\":0}\n",
      o.workload.c_str(), o.clients, o.pipeline, w.payload, o.kv_dim, o.vquant.c_str(),
      o.in_fmt.c_str(), o.out_fmt.c_str(), o.probes, o.hashes, ops, secs,
      secs > 0 ? ops / secs : 0.0, secs > 0 ? static_cast<double>(w.payload) * ops / secs : 0.0,
      mean, Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 0.999),
      lat.empty() ? 0.0 : lat.back(),
      lat.empty() ? 0.0 : write_us / static_cast<double>(lat.size()) * o.pipeline, cpu_s, faults,
      retries);
  return 0;
}

}  // namespace
}  // namespace pion::bench

int main(int argc, char** argv) { return pion::bench::Main(argc, argv); }
