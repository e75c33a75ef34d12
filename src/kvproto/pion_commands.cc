#include "kvproto/pion_commands.h"

namespace pion::server {

namespace {

constexpr uint32_t kKv = kCmdKvcache;
// The ATTEND.* handlers answer their own "requires: ..." texts; the arity is
// what COMMAND reports.
constexpr uint32_t kAt = kCmdKvcache | kCmdOwnArity;
constexpr uint32_t kR = kCmdReadonly, kW = kCmdWrite, kF = kCmdFast, kOom = kCmdDenyOom;
// Keys that are namespaces or session ids ("<ns>_pk" is checked as <ns>).
constexpr uint32_t kNs = kAclKeyNamespace;

const PionCommandRow kRows[] = {
    // KV.PREFIX: namespaces.
    {"KV.PREFIX.REGISTER", -4, kW | kOom | kKv, 1, 1, 1, kAclKvcache, kNs,
     "Register a namespace (creates <ns>_pk and <ns>_pv)", "0.1.0",
     "namespace kv_dim vquant [BLOCKS block_size hash_count hash_blob] [PREFILL_MS ms]",
     ModuleForm::kSame},
    {"KV.PREFIX.LOOKUP", -2, kR | kF | kKv, 1, 1, 1, kAclKvcache, kNs,
     "HIT if both sides of a namespace exist (CHAIN: its chain); records the value receipt",
     "0.1.0", "namespace [TOKENS n] [PREFILL_MS ms]", ModuleForm::kSame},
    {"KV.PREFIX.DROP", -2, kW | kKv, 1, -1, 1, kAclKvcache | kAclKeyspace, kNs,
     "Drop namespaces with their descendants; returns how many were removed", "0.1.0",
     "namespace...", ModuleForm::kSame},
    {"KV.PREFIX.BLOCKS", 2, kR | kF | kKv, 1, 1, 1, kAclKvcache, kNs,
     "The registered block-hash table", "0.1.0", "namespace", ModuleForm::kSame},
    {"KV.PREFIX.MEMBERSHIP", 4, kR | kF | kKv, 1, 1, 1, kAclKvcache, kNs,
     "Bitmap of which probe hashes are in the block table", "0.1.0",
     "namespace hash_count hash_blob", ModuleForm::kSame},
    // Key 1: the namespace of the INFO <ns> form (none without it). Server-wide
    // counters: not for a tenant (-@dangerous).
    {"KV.PREFIX.INFO", -1, kR | kF | kKv, 1, 1, 1, kAclKvcache | kAclDangerous, kNs,
     "Registry and V-store counters; with a namespace, its chain", "0.1.0", "",
     ModuleForm::kNoKeys},
    {"KV.PREFIX.SAVE", -1, kCmdAdmin | kCmdNoMulti | kKv, 0, 0, 0, kAclKvcache | kAclDangerous,
     kNs, "Snapshot every namespace, then truncate the WAL", "0.1.0", "[path]",
     ModuleForm::kAbsent},
    {"KV.PREFIX.COMMIT", 1, kW | kCmdNoMulti | kKv, 0, 0, 0, kAclKvcache, kNs,
     "Barrier: every acknowledged write is on stable storage", "0.1.0", "", ModuleForm::kAbsent},
    // KV.BLOCK: engine blocks, string keys named by chained hashes.
    {"KV.BLOCK.MATCH", -3, kR | kF | kKv, 2, -1, 1, kAclKeyspace | kAclKvcache, kAclKeyNumkeys,
     "How many leading keys (or which keys, BITMAP) exist; PIN ms pins them.", "0.2.0",
     "numkeys key... [BITMAP] [PIN milliseconds]", ModuleForm::kGetkeysApi},
    {"KV.BLOCK.UNPIN", -2, kW | kF | kKv, 0, 0, 0, kAclKeyspace | kAclKvcache, 0,
     "Ends pins taken by KV.BLOCK.MATCH ... PIN.", "0.2.0", "lease...", ModuleForm::kAbsent},
    {"KV.BLOCK.INFO", 2, kR | kF | kKv, 1, 1, 1, kAclKeyspace | kAclKvcache, 0,
     "A block's parent, live children, hash and tokens (no LRU touch).", "0.2.0", "key",
     ModuleForm::kAbsent},
    {"KV.BLOCK.CHAIN", -3, kW | kOom | kKv, 1, -1, 2, kAclString | kAclKvcache, kAclKeyChain,
     "Writes blocks as one linked chain, atomically.", "0.2.0",
     "[AFTER parentkey] [EX seconds | PX milliseconds] [HASHES hash_blob] [TOKENS count] "
     "(key value)...",
     ModuleForm::kAbsent},
    // The receipt: server-wide counters.
    {"PION.STATS", -1, kR | kF | kCmdLoading, 0, 0, 0, kAclKvcache | kAclDangerous, 0,
     "The value receipt: what the prefix cache saved (RESET zeroes it)", "0.1.0", "[RESET]",
     ModuleForm::kSame},
    {"PION.LOADROWS", 6, kW | kOom | kKv, 1, 1, 1, kAclKvcache, kNs,
     "Rows already in a namespace's stored form (what an AOF rewrite emits)", "0.1.0",
     "namespace side layer start stored_blob", ModuleForm::kOnly},
    // V: the rows of a session.
    {"V.STOREBATCH", -6, kW | kOom | kKv, 1, 1, 1, kAclKvcache, kNs,
     "Store rows [start, start+count) of one layer (FMT F32|F16)", "0.1.0",
     "sid layer start count blob [FMT F32 | F16]", ModuleForm::kSame},
    {"V.FETCH", -4, kR | kKv, 1, 1, 1, kAclKvcache, kNs,
     "Fetch rows: RANGE, BATCH or an id list (FMT NATIVE|F32|F16)", "0.1.0",
     "sid (layer RANGE start end | BATCH start end [num_layers] | layer id...) "
     "[FMT NATIVE | F32 | F16]",
     ModuleForm::kSame},
    {"V.INFO", -1, kR | kF | kKv, 1, 1, 1, kAclKvcache, kNs,
     "V-store counters, or one session's layout", "0.1.0", "[sid]", ModuleForm::kSame},
    // Stage 2. KV.PREFIX.WARM ns H D [attend_sid]: both ns (1) and attend_sid
    // (4) are keys (step 3); it copies ns's rows into attend_sid's slots, so
    // both need read and write permission. A session id (ATTEND.*) is checked
    // as the namespace it belongs to ("<ns>_attn" -> <ns>).
    {"KV.PREFIX.WARM", -4, kW | kAt, 1, 4, 3, kAclKvcache, kNs | kAclKeyAccess,
     "Rebuild the warm slots of a namespace from the V-store (any vquant)", "0.2.0",
     "namespace h d [attend_sid]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.STORE", -8, kW | kOom | kAt, 1, 1, 1, kAclAttend, kNs,
     "Store one layer's K/V [H,N,D] (f32, or f16 with FMT F16) as a warm slot", "0.2.0",
     "sid layer h n d k v [FMT F32 | F16]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.LOOKUP", 3, kR | kF | kAt, 1, 1, 1, kAclAttend, kNs,
     "HIT (warm), COLD (demoted) or MISS for a (session, layer) slot", "0.2.0", "sid layer",
     ModuleForm::kAbsent},
    {"ATTEND.PREFIX.QUERY", -7, kR | kAt, 1, 1, 1, kAclAttend, kNs,
     "Dense attention of H*M query rows over a warm slot", "0.2.0",
     "sid layer h d top_k q [fa_window]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.QUERY_FUSED", -11, kR | kAt, 1, 1, 1, kAclAttend, kNs,
     "Attention over a warm slot plus a causal caller suffix (GQA head map)", "0.2.0",
     "sid layer h_q d s_suf h_kv q k_suf v_suf head_map [fa_window] [LSE]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.QUERY_SPARSE", -9, kR | kAt, 1, 1, 1, kAclAttend, kNs,
     "Attention over explicit per-head token indices of a warm slot", "0.2.0",
     "sid layer h d k_sparse_max q indices counts [fa_window]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.QUERY_SPARSE_AUTO", -10, kR | kAt, 1, 1, 1, kAclAttend, kNs,
     "Attention over the K_top best blocks (block-mean or Quest selector)", "0.2.0",
     "sid layer h_q d b k_top h_kv q head_map [fa_window] [selector_id]", ModuleForm::kAbsent},
    {"ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED", -13, kR | kAt, 1, 1, 1, kAclAttend, kNs,
     "Sparse-auto attention over a warm slot plus a dense caller suffix", "0.2.0",
     "sid layer h_q d b k_top h_kv s_suf q k_suf v_suf head_map [fa_window] [selector_id]",
     ModuleForm::kAbsent},
    {"ATTEND.PREFIX.DROP", -2, kW | kAt, 1, 1, 1, kAclAttend, kNs,
     "Drop a session's slots (one layer or all), warm and cold; returns how many", "0.2.0",
     "sid [layer]", ModuleForm::kAbsent},
};

}  // namespace

std::span<const PionCommandRow> PionCommandRows() { return kRows; }

const PionCommandRow* FindPionCommandRow(std::string_view name) {
  for (const PionCommandRow& r : kRows)
    if (name == r.name) return &r;
  return nullptr;
}

std::string ModuleCommandFlags(const PionCommandRow& row) {
  std::string out;
  auto add = [&out](const char* f) {
    if (!out.empty()) out += ' ';
    out += f;
  };
  if (row.flags & kCmdWrite) add("write");
  if (row.flags & kCmdReadonly) add("readonly");
  if (row.flags & kCmdDenyOom) add("deny-oom");
  if (row.flags & kCmdFast) add("fast");
  if (row.module == ModuleForm::kGetkeysApi) add("getkeys-api");
  return out;
}

}  // namespace pion::server
