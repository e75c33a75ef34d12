// MEMORY USAGE|STATS|DOCTOR|MALLOC-STATS|PURGE|HELP and MODULE LIST|LOAD|LOADEX|
// UNLOAD|HELP (docs/protocol.md "Server").
//
// MEMORY STATS answers Redis 7.0's 27 fields (plus db.0 while the keyspace has
// keys) from what pion measures: total.allocated is INFO's used_memory (the data
// budget maxmemory bounds), clients.normal the client buffers, the allocator
// fields glibc's figures. What pion does not have (replication backlog, AOF
// buffer, Lua and function caches, cluster links) is 0, as on a Redis without
// them. pion is built on glibc's allocator, so MALLOC-STATS answers as a Redis
// built without jemalloc does, and PURGE hands free memory back with
// malloc_trim. pion loads no Redis modules: MODULE LIST is empty and LOAD fails.
#include <malloc.h>

#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/client_registry.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "server/metrics.h"
#include "store/key_ops.h"
#include "store/store.h"
#include "store/strings.h"

namespace pion::server {

namespace {

// MEMORY DOCTOR's report texts, Redis 7.0's words.
constexpr std::string_view kMemoryDoctorEmpty =
    "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be "
    "used in these conditions. Please, leave for your mission on Earth and fill it with some "
    "data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n";
constexpr std::string_view kMemoryDoctorHealthy =
    "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs "
    "on this base.\n";
constexpr std::string_view kMemoryDoctorIssues =
    "Sam, I detected a few issues in this Redis instance memory implants:\n\n";
constexpr std::string_view kMemoryDoctorPeak =
    " * Peak memory: In the past this instance used more than 150% the memory that is currently "
    "using. The allocator is normally not able to release memory after a peak, so you can expect "
    "to see a big fragmentation ratio, however this is actually harmless and is only due to the "
    "memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than "
    "expected, the memory will be used as soon as you fill the Redis instance with more data. If "
    "the memory peak was only occasional and you want to try to reclaim memory, please try the "
    "MEMORY PURGE command, otherwise the only other option is to shutdown and restart the "
    "instance.\n\n";
constexpr std::string_view kMemoryDoctorFragmentation =
    " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than "
    "1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum "
    "of the logical allocations Redis performed). This problem is usually due either to a large "
    "peak memory (check if there is a peak memory entry above in the report) or may result from a "
    "workload that causes the allocator to fragment memory a lot. If the problem is a large peak "
    "memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator "
    "and not the default libc malloc. Note: The currently used allocator is \"libc\".\n\n";
constexpr std::string_view kMemoryDoctorClientBuffers =
    " * Big client buffers: The clients output buffers in this instance are greater than 200K "
    "per client (on average). This may result from different causes, like Pub/Sub clients "
    "subscribed to channels bot not receiving data fast enough, so that data piles on the Redis "
    "instance output buffer, or clients sending commands with large replies or very large "
    "sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to "
    "investigate the issue if it causes problems in your instance, or to understand better why "
    "certain clients are using a big amount of memory.\n\n";
constexpr std::string_view kMemoryDoctorSignOff =
    "I'm here to keep you safe, Sam. I want to help you.\n";
// What a Redis built without jemalloc answers to MEMORY MALLOC-STATS.
constexpr std::string_view kMemoryMallocStatsUnsupported =
    "Stats not supported for the current allocator";

void ReplyHelp(CommandContext& ctx, std::string_view cmd, std::span<const char* const> lines) {
  ctx.reply->ArrayHeader(lines.size() + 3);
  ctx.reply->SimpleString(std::string(cmd) + " <subcommand> [<arg> [value] [opt] ...]. " +
                          "Subcommands are:");
  for (const char* l : lines) ctx.reply->SimpleString(l);
  ctx.reply->SimpleString("HELP");
  ctx.reply->SimpleString("    Prints this help.");
}

// The figures MEMORY STATS and MEMORY DOCTOR share (Redis's memory overhead data).
struct MemoryFigures {
  uint64_t peak = 0, total = 0, clients = 0, keys = 0, ht_main = 0;
  uint64_t overhead = 0, dataset = 0, bytes_per_key = 0;
  double dataset_perc = 0, peak_perc = 0;
  uint64_t alloc = 0, rss = 0;
  double frag = 0;
  int64_t frag_bytes = 0;
  uint64_t connected = 0;
};

MemoryFigures Measure(CommandEnv& s) {
  MemoryFigures m;
  m.total = s.memory().UsedMemory();
  m.peak = s.memory().used_memory_peak();
  m.clients = s.clients().memory();
  m.connected = s.clients().connected();
  if (store::Store* st = s.store()) m.keys = st->DbSize();
  // Each key's entry (index slot, LRU links, expiry) is the store's fixed
  // per-key charge: the keyspace's overhead; the rest of the budget is data.
  m.ht_main = m.keys * store::kStrEntryOverhead;
  if (m.ht_main > m.total) m.ht_main = m.total;
  m.overhead = m.clients + m.ht_main;
  m.dataset = m.total - m.ht_main;
  uint64_t net = m.total > 0 ? m.total : 1;  // nothing is allocated at start-up
  m.dataset_perc = static_cast<double>(static_cast<float>(m.dataset) * 100 / net);
  m.peak_perc = m.peak > 0 ? static_cast<double>(static_cast<float>(m.total) * 100 / m.peak) : 0;
  m.bytes_per_key = m.keys > 0 ? m.total / m.keys : 0;
  m.alloc = s.memory().AllocatorMemory();
  m.rss = ResidentSetBytes();
  m.frag = m.alloc > 0 ? static_cast<double>(static_cast<float>(m.rss) / m.alloc) : 0;
  m.frag_bytes = static_cast<int64_t>(m.rss) - static_cast<int64_t>(m.alloc);
  return m;
}

void MemoryStats(CommandContext& ctx) {
  MemoryFigures m = Measure(*ctx.env);
  auto field = [&](const char* name, int64_t v) {
    ctx.reply->Bulk(name);
    ctx.reply->Integer(v);
  };
  auto ratio = [&](const char* name, double v) {
    ctx.reply->Bulk(name);
    ctx.reply->Double(v);
  };
  auto u = [](uint64_t v) { return static_cast<int64_t>(v); };
  ctx.reply->MapHeader(27 + (m.keys > 0 ? 1 : 0));
  field("peak.allocated", u(m.peak));
  field("total.allocated", u(m.total));
  field("startup.allocated", 0);
  field("replication.backlog", 0);
  field("clients.slaves", 0);
  field("clients.normal", u(m.clients));
  field("cluster.links", 0);
  field("aof.buffer", 0);
  field("lua.caches", 0);
  field("functions.caches", 0);
  if (m.keys > 0) {  // Redis lists the databases that hold keys
    ctx.reply->Bulk("db.0");
    ctx.reply->MapHeader(3);
    field("overhead.hashtable.main", u(m.ht_main));
    field("overhead.hashtable.expires", 0);
    field("overhead.hashtable.slot-to-keys", 0);
  }
  field("overhead.total", u(m.overhead));
  field("keys.count", u(m.keys));
  field("keys.bytes-per-key", u(m.bytes_per_key));
  field("dataset.bytes", u(m.dataset));
  ratio("dataset.percentage", m.dataset_perc);
  ratio("peak.percentage", m.peak_perc);
  // glibc has no active/resident split: both are the resident set, as Redis
  // reports them without jemalloc.
  field("allocator.allocated", u(m.alloc));
  field("allocator.active", u(m.rss));
  field("allocator.resident", u(m.rss));
  ratio("allocator-fragmentation.ratio", m.frag);
  field("allocator-fragmentation.bytes", m.frag_bytes);
  ratio("allocator-rss.ratio", 1.0);
  field("allocator-rss.bytes", 0);
  ratio("rss-overhead.ratio", 1.0);
  field("rss-overhead.bytes", 0);
  ratio("fragmentation", m.frag);
  field("fragmentation.bytes", m.frag_bytes);
}

// Redis's memory doctor, over the figures pion has (no replicas, no scripts,
// no allocator split: those checks never fire).
void MemoryDoctor(CommandContext& ctx) {
  MemoryFigures m = Measure(*ctx.env);
  bool empty = false, big_peak = false, high_frag = false, big_client_buf = false;
  if (m.total < 5 * 1024 * 1024) {
    empty = true;
  } else {
    big_peak = static_cast<float>(m.peak) / static_cast<float>(m.total) > 1.5f;
    high_frag = m.frag > 1.4 && m.frag_bytes > (10 << 20);
    big_client_buf = m.connected > 0 && m.clients / m.connected > 1024 * 200;
  }
  std::string s;
  if (empty) {
    s = std::string(kMemoryDoctorEmpty);
  } else if (!big_peak && !high_frag && !big_client_buf) {
    s = std::string(kMemoryDoctorHealthy);
  } else {
    s = std::string(kMemoryDoctorIssues);
    if (big_peak) s += kMemoryDoctorPeak;
    if (high_frag) s += kMemoryDoctorFragmentation;
    if (big_client_buf) s += kMemoryDoctorClientBuffers;
    s += kMemoryDoctorSignOff;
  }
  ctx.reply->Verbatim(s);
}

void MemoryUsage(CommandContext& ctx) {
  // As Redis: any number of SAMPLES <n>, n >= 0 (pion counts exactly: n is unused).
  for (size_t j = 3; j < ctx.args.size(); j += 2) {
    if (!IsKeyword(ctx.args[j], "SAMPLES") || j + 1 >= ctx.args.size())
      return ctx.reply->Error(kErrSyntaxError);
    auto samples = ParseInt64Strict(ctx.args[j + 1]);
    if (!samples) return ctx.reply->Error(kErrNotInteger);
    if (*samples < 0) return ctx.reply->Error(kErrSyntaxError);
  }
  if (ctx.env->store() == nullptr) return ctx.reply->Null();
  uint64_t n = store::OpKeyMemory({*ctx.env->store()}, ctx.args[2]);
  if (n == 0)
    ctx.reply->Null();
  else
    ctx.reply->Integer(static_cast<int64_t>(n));
}

// MEMORY <subcommand>: each subcommand's argument count as Redis's table has it.
void Memory(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  const size_t n = ctx.args.size();
  auto arity = [&](bool ok) {
    if (!ok) ctx.reply->Error(WrongArity("memory|" + ToLower(sub)));
    return ok;
  };
  if (IsKeyword(sub, "USAGE")) {
    if (arity(n >= 3)) MemoryUsage(ctx);
  } else if (IsKeyword(sub, "STATS")) {
    if (arity(n == 2)) MemoryStats(ctx);
  } else if (IsKeyword(sub, "DOCTOR")) {
    if (arity(n == 2)) MemoryDoctor(ctx);
  } else if (IsKeyword(sub, "MALLOC-STATS")) {
    if (arity(n == 2)) ctx.reply->Bulk(kMemoryMallocStatsUnsupported);
  } else if (IsKeyword(sub, "PURGE")) {
    if (!arity(n == 2)) return;
    ::malloc_trim(0);
    ctx.reply->SimpleString("OK");
  } else if (IsKeyword(sub, "HELP")) {
    static const char* const kLines[] = {
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    };
    if (arity(n == 2)) ReplyHelp(ctx, "MEMORY", kLines);
  } else {
    ctx.reply->Error(UnknownSubcommandError("MEMORY", sub));
  }
}

void Module(CommandContext& ctx) {
  std::string_view sub = ctx.args[1];
  const size_t n = ctx.args.size();
  auto arity = [&](bool ok) {
    if (!ok) ctx.reply->Error(WrongArity("module|" + ToLower(sub)));
    return ok;
  };
  if (IsKeyword(sub, "LIST")) {
    if (arity(n == 2)) ctx.reply->ArrayHeader(0);  // no module is ever loaded
  } else if (IsKeyword(sub, "LOAD") || IsKeyword(sub, "LOADEX")) {
    if (arity(n >= 3)) ctx.reply->Error(kErrModuleLoad);
  } else if (IsKeyword(sub, "UNLOAD")) {
    if (arity(n == 3)) ctx.reply->Error(kErrModuleUnloadNoSuchModule);
  } else if (IsKeyword(sub, "HELP")) {
    static const char* const kLines[] = {
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        ("    Load a module library from <path>, while passing it module configurations and "
         "optional arguments."),
        "UNLOAD <name>",
        "    Unload a module.",
    };
    if (arity(n == 2)) ReplyHelp(ctx, "MODULE", kLines);
  } else {
    ctx.reply->Error(UnknownSubcommandError("MODULE", sub));
  }
}

}  // namespace

// MEMORY's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kMemorySubcommands[] = {
    {"USAGE", "4.0.0", "key [SAMPLES count]", "Estimates the memory usage of a key."},
    {"STATS", "4.0.0", "", "Returns details about memory usage."},
    {"DOCTOR", "4.0.0", "", "Outputs a memory problems report."},
    {"MALLOC-STATS", "4.0.0", "", "Returns the allocator statistics."},
    {"PURGE", "4.0.0", "", "Asks the allocator to release memory."},
    {"HELP", "4.0.0", "", "Returns helpful text about the subcommands."},
};

// MODULE's subcommands (SubcommandDoc, command.h).
constexpr SubcommandDoc kModuleSubcommands[] = {
    {"LIST", "4.0.0", "", "Returns all loaded modules (none in pion)."},
    {"LOAD", "4.0.0", "path [arg...]", "Loads a module (refused: pion loads no Redis modules)."},
    {"LOADEX", "7.0.0", "path [CONFIG name value...] [ARGS args...]",
     "Loads a module with configuration (refused: pion loads no Redis modules)."},
    {"UNLOAD", "4.0.0", "name", "Unloads a module."},
    {"HELP", "5.0.0", "", "Returns helpful text about the subcommands."},
};

void AddMemoryCommands(std::vector<CommandSpec>* out) {
  // MEMORY USAGE's key is argument 2 (the other subcommands have none: the range is empty).
  out->push_back({"MEMORY", -2, kCmdReadonly, 2, 2, 1, Memory,
                  "MEMORY USAGE key, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.", "server", "4.0.0",
                  "", kMemorySubcommands});
  out->back().acl_categories |= kAclKeyspace;
  out->push_back({"MODULE", -2, kCmdAdmin, 0, 0, 0, Module,
                  "MODULE LIST (empty: pion loads no Redis modules), LOAD, LOADEX, UNLOAD, HELP.",
                  "server", "4.0.0", "", kModuleSubcommands});
}

}  // namespace pion::server
