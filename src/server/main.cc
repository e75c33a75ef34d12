// pion-server: parse the config, set up logging and the process (allocator,
// signals, data directory), start the workers, wait for SIGTERM/SIGINT or
// SHUTDOWN, shut down gracefully and exit 0.
#include <malloc.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/cpu.h"
#include "base/log.h"
#include "server/config.h"
#include "server/fd_limit.h"
#include "server/kv_events.h"
#include "server/metrics.h"
#include "server/persist_glue.h"
#include "server/protected_mode.h"
#include "server/server.h"

namespace {

// "mkdir -p": Redis refuses a missing dir; creating it is friendlier and is
// the only place pion writes outside an existing --dir (docs/ARCHITECTURE.md).
bool MakeDirs(const std::string& path, std::string* err) {
  std::string cur;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    cur = path.substr(0, slash);
    i = slash + 1;
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      *err = cur + ": " + std::strerror(errno);
      return false;
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = path + ": not a directory";
    return false;
  }
  return true;
}

// Freed memory malloc keeps instead of returning it to the OS.
constexpr int kTrimThreshold = 1 << 30;

// Before a large snapshot loads, recovery grows the heap once and hands it back
// to malloc (persist/recovery.cc): keep up to twice the snapshot's size freed
// so those pages are reused by the load instead of being trimmed. 0: recovery
// ended, back to the server's setting.
void KeepFreedHeap(uint64_t snapshot_bytes) {
  if (snapshot_bytes == 0) {
    mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
    return;
  }
  mallopt(M_TRIM_THRESHOLD,
          static_cast<int>(std::min<uint64_t>(snapshot_bytes * 2, 1ull << 31) - 1));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pion;
  using namespace pion::server;

  auto parsed = ParseConfig(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "pion-server: %s\n", std::string(parsed.status().message()).c_str());
    std::fprintf(stderr, "Try 'pion-server --help'.\n");
    return 1;
  }
  Config cfg = std::move(parsed).value();
  if (cfg.show_help) {
    std::fputs(ConfigUsage().c_str(), stdout);
    return 0;
  }
  if (cfg.show_version) {
    std::printf("pion-server v=%s\n", PION_VERSION);
    return 0;
  }

  SetLogLevel(cfg.loglevel);
  if (!cfg.logfile.empty() && !SetLogFile(cfg.logfile)) {
    std::fprintf(stderr, "pion-server: cannot open log file '%s': %s\n", cfg.logfile.c_str(),
                 std::strerror(errno));
    return 1;
  }
  // daemonize: before any thread starts. The working directory stays (--dir
  // may be relative); standard input, output and error go to /dev/null.
  if (cfg.daemonize && ::daemon(1, 0) != 0) {
    std::fprintf(stderr, "pion-server: cannot daemonize: %s\n", std::strerror(errno));
    return 1;
  }
  std::string err;
  if (!MakeDirs(cfg.dir, &err)) {
    LOG_WARNING("cannot use data directory %s", err.c_str());
    return 1;
  }

  // Keep freed memory for reuse: big buffers are recycled instead of being
  // unmapped and faulted in again (~1 GB/s first touch here).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);

  // SIGPIPE off (a write to a closed socket returns EPIPE instead); SIGTERM and
  // SIGINT are blocked in every thread and read from a signalfd by Serve().
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (sfd < 0) {
    LOG_WARNING("signalfd: %s", std::strerror(errno));
    return 1;
  }

  // Descriptors for maxclients connections, or fewer clients (as Redis does).
  FdLimit fds = AdjustOpenFileLimit(cfg.maxclients);
  if (!fds.warning.empty()) LOG_WARNING("%s", fds.warning.c_str());
  cfg.maxclients = fds.maxclients;

  Server server(std::move(cfg));
  const Config& c = server.config();
  // Durability (--kvcache): the layer first; recovery runs once the server listens,
  // answering -LOADING meanwhile.
  std::unique_ptr<persist::Persistence> persistence = SetUpPersistence(server, KeepFreedHeap);
  // KV events (docs/kv_events.md): a bad endpoint stops start-up. The first batch
  // (what the store holds) goes out before any command can change it: now when
  // nothing is recovered, else at the end of recovery, while still loading.
  auto kv_events = KvEvents::Start(c, c.port);
  if (!kv_events.ok()) {
    LOG_WARNING("cannot start: %s", kv_events.status().ToString().c_str());
    return 1;
  }
  KvEvents* events = kv_events->get();
  server.set_kv_events(events);
  if (events != nullptr && persistence == nullptr) events->Attach(server.store());
  Status st = server.Start();
  if (!st.ok()) {
    LOG_WARNING("cannot start: %s", st.ToString().c_str());
    return 1;
  }
  LOG_NOTICE(
      "pion-server %s listening on %s:%d, %d workers, dir %s, kvcache %s, fast lane %s, cpu: %s",
      PION_VERSION, c.bind.c_str(), server.port(), server.num_workers(), c.dir.c_str(),
      c.kvcache ? "on" : "off",
      server.fastlane_port() > 0 ? ("port " + std::to_string(server.fastlane_port())).c_str()
                                 : "off",
      CpuSummary().c_str());
  // Prometheus GET /metrics (its own thread; never a worker's).
  std::unique_ptr<MetricsEndpoint> metrics;
  if (c.metrics_port > 0) {
    metrics = std::make_unique<MetricsEndpoint>(&server);
    st = metrics->Start(c.bind, c.metrics_port);
    if (!st.ok()) {
      LOG_WARNING("cannot serve metrics on %s:%d: %s", c.bind.c_str(), c.metrics_port,
                  st.ToString().c_str());
      ::_exit(1);
    }
    LOG_NOTICE("metrics on http://%s:%d/metrics", c.bind.c_str(), metrics->port());
  }
  if (server.listeners().tls_port() != 0)
    LOG_NOTICE("TLS listening on %s:%d (client certificates: %s)%s", c.bind.c_str(),
               server.listeners().tls_port(), c.tls_auth_clients.c_str(),
               c.port == 0 ? ", no plaintext port" : "");
  // A password-less default user (no requirepass, no ACL password) on an
  // address others can reach (the users and the rules are loaded by now).
  if (server.default_user_open() && !IsLoopbackBind(c.bind)) {
    if (c.protected_mode)
      LOG_WARNING(
          "protected mode: bound to %s with no password for the default user, so only clients "
          "on the loopback interface are served (others get -DENIED); set --requirepass (or a "
          "default user password), or --protected-mode no",
          c.bind.c_str());
    else
      LOG_WARNING(
          "WARNING: bound to %s with no password for the default user and --protected-mode no: "
          "anyone who can reach this address may read, write and flush every namespace; set "
          "--requirepass or ACL users (docs/security.md)",
          c.bind.c_str());
  }
  st = RecoverPersistence(server, persistence.get(), [&] {
    if (events != nullptr) events->Attach(server.store());
  });
  if (!st.ok()) {
    LOG_WARNING("cannot start: %s", st.ToString().c_str());
    ::_exit(1);
  }
  if (server.store() != nullptr && !c.tier_dir.empty()) {
    // The tier file's space the loaded snapshot does not reference is free now
    // (docs/tier_format.md §3); what recovery brought back into RAM beyond the
    // budget goes to the tier.
    server.store()->FinishTierAdoption();
    const uint64_t moved = server.store()->MoveOverBudgetToTier();
    KvEvents::FlushThread();  // what a full tier dropped on the way
    if (moved > 0)
      LOG_NOTICE("disk tier: %llu recovered entries moved out of RAM",
                 static_cast<unsigned long long>(moved));
  }
  LOG_NOTICE("Ready to accept connections tcp");
  if (events != nullptr)
    LOG_NOTICE("KV events on %s (topic %s)", events->publisher().last_endpoint().c_str(),
               events->topic().c_str());
  int rc = server.Serve(sfd);
  if (metrics) metrics->Stop();
  ::close(sfd);
  return rc;
}
