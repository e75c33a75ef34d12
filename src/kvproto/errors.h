// Every client-facing error text of the server, and the one table that maps a
// Status (code, reason, fields: "Reasons" below) to a RESP error line. A text
// that does not start with a code word gets "ERR " (as Redis does). Code words:
// ERR, NOPROTO, NOAUTH, WRONGPASS, OOM, LOADING, COLDMISS, and pion's own
// NOSESSION, NOKVCACHE, NOPERSIST; in the Redis module also CROSSSLOT, TRYAGAIN,
// WRONGTYPE (docs/protocol.md "Error code words"). Clients branch on the word.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "net/resp_errors.h"

namespace pion::server {

struct ConfigSetError;

inline constexpr std::string_view kErrNotEnabled = "NOKVCACHE V-store not enabled (use --kvcache)";
inline constexpr std::string_view kErrNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kErrSessionNotFound = "NOSESSION session not found";
inline constexpr std::string_view kErrLoading = "LOADING pion is loading the dataset in memory";
inline constexpr std::string_view kErrNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kErrNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kErrNoPersistence = "NOPERSIST persistence is not enabled";
// The code word a message without its own gets, with its space (to test for, or strip).
inline constexpr std::string_view kErrCodeWord = "ERR ";
// A connection refused at accept (maxclients), as Redis words it.
inline constexpr std::string_view kErrMaxClients = "ERR max number of clients reached";
// ACL GENPASS when the system's random source fails.
inline constexpr std::string_view kErrRandomBytes = "ERR cannot read random bytes";
// The Redis module: RedisModule_ModuleTypeSetValue refused the new namespace value.
inline constexpr std::string_view kErrModuleSetKey = "ERR could not set the key";

// Command texts (Redis' wording where Redis has the command; pion's own otherwise).
inline constexpr std::string_view kErrConfigRewrite =
    "ERR CONFIG REWRITE is not supported: edit the config file";
inline constexpr std::string_view kErrSyntaxError = "ERR syntax error";
inline constexpr std::string_view kErrNoShutdownInProgress = "ERR No shutdown in progress.";
inline constexpr std::string_view kErrShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs.";
inline constexpr std::string_view kErrInvalidClientId = "ERR Invalid client ID";
inline constexpr std::string_view kErrClientIdNotPositive =
    "ERR client-id should be greater than 0";
inline constexpr std::string_view kErrNoSuchClient = "ERR No such client";
// CLIENT TRACKING / CACHING (Redis 7.0's texts).
inline constexpr std::string_view kErrTrackingOneRedirect =
    "ERR A client can only redirect to a single other client";
inline constexpr std::string_view kErrTrackingNoRedirClient =
    "ERR The client ID you want redirect to does not exist";
inline constexpr std::string_view kErrTrackingPrefixNeedsBcast =
    "ERR PREFIX option requires BCAST mode to be enabled";
inline constexpr std::string_view kErrTrackingBcastSwitch =
    "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then "
    "re-enabling it with a different mode.";
inline constexpr std::string_view kErrTrackingOptBcast =
    "ERR OPTIN and OPTOUT are not compatible with BCAST";
inline constexpr std::string_view kErrTrackingOptinOptout =
    "ERR You can't specify both OPTIN mode and OPTOUT mode";
inline constexpr std::string_view kErrTrackingOptSwitch =
    "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then "
    "re-enabling it with a different mode.";
inline constexpr std::string_view kErrCachingNotTracking =
    "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or "
    "OPTOUT mode enabled";
inline constexpr std::string_view kErrCachingYes =
    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.";
inline constexpr std::string_view kErrCachingNo =
    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.";
inline constexpr std::string_view kErrClientUnblockReason =
    "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";
inline constexpr std::string_view kErrClientPauseMode =
    "ERR CLIENT PAUSE mode must be WRITE or ALL";
inline constexpr std::string_view kErrTimeoutNotInteger =
    "ERR timeout is not an integer or out of range";
inline constexpr std::string_view kErrTimeoutNegative = "ERR timeout is negative";
inline constexpr std::string_view kErrNoKeyArguments = "ERR The command has no key arguments";
inline constexpr std::string_view kErrInvalidCommand = "ERR Invalid command specified";
// MODULE LOAD / LOADEX / UNLOAD: pion loads no Redis modules (Redis's texts for a
// load that failed and a name that is not loaded).
inline constexpr std::string_view kErrModuleLoad =
    "ERR Error loading the extension. Please check the server logs.";
inline constexpr std::string_view kErrModuleUnloadNoSuchModule =
    "ERR Error unloading module: no such module with that name";
inline constexpr std::string_view kErrInvalidArgCount =
    "ERR Invalid number of arguments specified for command";
inline constexpr std::string_view kErrSlowlogCount =
    "ERR count should be greater than or equal to -1";
inline constexpr std::string_view kErrHelloProtoNotInteger =
    "ERR Protocol version is not an integer or out of range";
inline constexpr std::string_view kErrBadClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kErrDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kErrNsKeyLength = "ERR ns_key length must be 1..512";
inline constexpr std::string_view kErrKvDimRange = "ERR kv_dim out of range (1..16384)";
inline constexpr std::string_view kErrRegisterBlocksTwice =
    "ERR KV.PREFIX.REGISTER option BLOCKS given twice";
inline constexpr std::string_view kErrBlocksArgs =
    "ERR BLOCKS requires: block_size hash_count hash_blob";
inline constexpr std::string_view kErrBlocksBlockSizeRange =
    "ERR BLOCKS block_size out of range (1..65536)";
inline constexpr std::string_view kErrBlocksHashCountRange =
    "ERR BLOCKS hash_count out of range (0..1048576)";
inline constexpr std::string_view kErrBlocksHashBlobLength = "ERR BLOCKS hash_blob length mismatch";
inline constexpr std::string_view kErrRegisterPrefillTwice =
    "ERR KV.PREFIX.REGISTER option PREFILL_MS given twice";
inline constexpr std::string_view kErrPrefillNeedsValue = "ERR PREFILL_MS requires a value";
inline constexpr std::string_view kErrRegisterParentTwice =
    "ERR KV.PREFIX.REGISTER option PARENT given twice";
inline constexpr std::string_view kErrParentNeedsValue = "ERR PARENT requires a namespace";
inline constexpr std::string_view kErrParentNotFound = "ERR PARENT namespace is not registered";
inline constexpr std::string_view kErrPrefillRange = "ERR PREFILL_MS out of range (0..86400000)";
inline constexpr std::string_view kErrLookupUnknownOption =
    "ERR KV.PREFIX.LOOKUP unknown option (TOKENS, PREFILL_MS, CHAIN)";
inline constexpr std::string_view kErrLookupChainTwice =
    "ERR KV.PREFIX.LOOKUP option CHAIN given twice";
inline constexpr std::string_view kErrLookupOptionNeedsValue =
    "ERR KV.PREFIX.LOOKUP option needs a value";
inline constexpr std::string_view kErrTokensRange = "ERR TOKENS out of range (0..100000000)";
inline constexpr std::string_view kErrHashCountRange = "ERR hash_count out of range (0..1048576)";
inline constexpr std::string_view kErrHashBlobLength = "ERR hash_blob length mismatch";
inline constexpr std::string_view kErrLayerRange = "ERR layer out of range (0..255)";
inline constexpr std::string_view kErrFetchReplyTooBig =
    "ERR V.FETCH reply would exceed 1073741824 bytes (fetch fewer rows)";
inline constexpr std::string_view kErrStoreStartRange = "ERR invalid start (0..16777216)";
inline constexpr std::string_view kErrStoreCountRange = "ERR invalid count (1..16777216)";
inline constexpr std::string_view kErrStoreEndRange = "ERR start + count exceeds 16777216 tokens";
inline constexpr std::string_view kErrStoreBatchOption =
    "ERR V.STOREBATCH: unknown option (expected FMT F32|F16)";
inline constexpr std::string_view kErrFetchRangeArgs =
    "ERR V.FETCH RANGE requires: session_id layer_id RANGE start end";
inline constexpr std::string_view kErrFetchRangeOrder =
    "ERR invalid RANGE: end must exceed start (>=0)";
inline constexpr std::string_view kErrFetchBatchArgs =
    "ERR V.FETCH BATCH requires: session_id BATCH start end [num_layers] [FMT fmt]";
inline constexpr std::string_view kErrFetchBatchOrder =
    "ERR V.FETCH BATCH invalid range: end must exceed start (>=0)";
inline constexpr std::string_view kErrNumLayersRange = "ERR num_layers out of range (1..256)";
inline constexpr std::string_view kErrFetchBatchNoLayers =
    "ERR V.FETCH BATCH: session has no stored layers";
inline constexpr std::string_view kErrNativeNeedsRange =
    "ERR FMT NATIVE requires the RANGE or BATCH form";
inline constexpr std::string_view kErrNoTokenIds = "ERR no token IDs provided";
inline constexpr std::string_view kErrTooManyTokenIds =
    "ERR too many token IDs (at most 4096; use RANGE)";
inline constexpr std::string_view kErrTokenIdRange = "ERR token id out of range (0..16777215)";
inline constexpr std::string_view kErrFetchArgs =
    "ERR V.FETCH requires: session_id layer_id token_id [...]";
inline constexpr std::string_view kErrWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view kErrAuthNoPassword =
    "ERR AUTH <password> called without any password configured for the default user. Are you "
    "sure your configuration is correct?";
inline constexpr std::string_view kErrHelloNoAuth =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
    "RESP protocol version at the same time";
// KV.BLOCK.* (docs/protocol.md "Blocks"); numkeys as Redis 7.0's SINTERCARD.
inline constexpr std::string_view kErrNumkeysPositive = "ERR numkeys should be greater than 0";
inline constexpr std::string_view kErrNumkeysRange = "ERR numkeys out of range (1..1048576)";
inline constexpr std::string_view kErrNumkeysArgs =
    "ERR Number of keys can't be greater than number of args";
inline constexpr std::string_view kErrPinRange = "ERR PIN out of range (1..600000)";
inline constexpr std::string_view kErrTooManyLeases =
    "ERR too many block leases (max-block-leases)";
inline constexpr std::string_view kErrChainTokens = "ERR TOKENS out of range (1..65536)";
inline constexpr std::string_view kErrChainHashes =
    "ERR HASHES must hold 8 bytes (a little-endian u64) per key";
// KV.BLOCK.CHAIN ... FORMAT (docs/protocol.md "Block formats").
inline constexpr std::string_view kErrBlockQuantized =
    "ERR the value is a quantized block (KV.BLOCK.CHAIN FORMAT): read it with GET or "
    "replace it with SET";
inline constexpr std::string_view kErrChainFormat =
    "ERR FORMAT must be one of int8, turbo4, turbo3, turbo2, fp16, fp8, mlx4g32";
inline constexpr std::string_view kErrChainDtype = "ERR DTYPE must be one of f16, bf16, f32";
inline constexpr std::string_view kErrChainFormatNeeds = "ERR FORMAT requires DTYPE and ROW";
inline constexpr std::string_view kErrChainFormatAlone = "ERR DTYPE and ROW require FORMAT";
// The ROW a format does not allow (with the format's rule appended).
std::string ChainRowError(std::string_view format, uint32_t multiple, uint32_t max_row);
// A value whose length is not whole rows (key index from 0 in the chain).
std::string ChainValueLengthError(size_t index, size_t row_bytes);
// Non-finite input refused by a quantized format (key index; `st` the codec's
// quant::Reason::kNonFinite, which names the row within the value).
std::string ChainNonFiniteError(size_t index, const Status& st);
inline constexpr std::string_view kErrPinInModule =
    "ERR PIN is not supported in the module (pion-server only)";
// ACL (Redis 7.0's texts). A key denial never names the key.
inline constexpr std::string_view kErrNoPermKey =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
inline constexpr std::string_view kErrNoPermChannel =
    "NOPERM this user has no permissions to access one of the channels used as arguments";
inline constexpr std::string_view kErrAclSyntax = "Syntax error";
inline constexpr std::string_view kErrAclChannelAfterAll =
    "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not "
    "have any effect. Try 'resetchannels' to start with an empty list of channels";
inline constexpr std::string_view kErrAclUnknownCommand = "Unknown command or category name in ACL";
inline constexpr std::string_view kErrAclSubcommandFirstArg =
    "Allowing first-arg of a subcommand is not supported";
inline constexpr std::string_view kErrAclKeyAfterAll =
    "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have "
    "any effect. Try 'resetkeys' to start with an empty list of patterns";
inline constexpr std::string_view kErrAclNoSuchPassword =
    "The password you are trying to remove from the user does not exist";
inline constexpr std::string_view kErrAclBadHash =
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal "
    "characters";
inline constexpr std::string_view kErrAclBadUsername =
    "ERR Usernames can't contain spaces or null characters";
inline constexpr std::string_view kErrAclDelDefault = "ERR The 'default' user cannot be removed";
inline constexpr std::string_view kErrAclFileLine =
    "ERR the ACL file line must start with 'user <name>'";
inline constexpr std::string_view kErrAclDuplicateUser =
    "ERR Duplicate user found. A user can only be defined once in config files";
inline constexpr std::string_view kErrAclNoFile =
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify users "
    "via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis "
    "configuration file set) in order to store users in the Redis configuration.";
inline constexpr std::string_view kErrAclGenpass =
    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive "
    "number up to 4096";
inline constexpr std::string_view kErrSaveInProgress = "ERR Background save already in progress";
inline constexpr std::string_view kErrAofRewriteInProgress =
    "ERR Background append only file rewriting already in progress";
inline constexpr std::string_view kErrShuttingDown = "ERR server is shutting down";

// Stage 2 (ATTEND.PREFIX.*, KV.PREFIX.WARM): the texts existing clients know, plus ours
// for ATTEND.PREFIX.DROP, FMT, LSE, fa_window and the slot-size bound. The cold-tier
// error has its own code word, COLDMISS, so a transport (the binary fast lane) maps it
// to its own status by the code word, never by the text.
inline constexpr std::string_view kErrCodeColdMiss = "COLDMISS";
inline constexpr std::string_view kErrColdMiss =
    "COLDMISS session evicted to cold tier (call KV.PREFIX.WARM)";
inline constexpr std::string_view kErrAttendStoreArgs =
    "ERR ATTEND.PREFIX.STORE requires: session_id layer_id H N D K_blob V_blob";
inline constexpr std::string_view kErrAttendStoreShape = "ERR invalid H/N/D (must be > 0)";
inline constexpr std::string_view kErrAttendStoreBlobs =
    "ERR K/V blob size mismatch (expected H*N*D*4 each)";
inline constexpr std::string_view kErrAttendStoreBlobsF16 =
    "ERR K/V blob size mismatch (expected H*N*D*2 each with FMT F16)";
inline constexpr std::string_view kErrAttendStoreOption =
    "ERR ATTEND.PREFIX.STORE: unknown option (expected FMT F32|F16)";
inline constexpr std::string_view kErrAttendLookupArgs =
    "ERR ATTEND.PREFIX.LOOKUP requires: session_id layer_id";
inline constexpr std::string_view kErrAttendLayer = "ERR invalid layer_id (must be >= 0)";
inline constexpr std::string_view kErrAttendDropArgs =
    "ERR ATTEND.PREFIX.DROP requires: session_id [layer_id]";
inline constexpr std::string_view kErrAttendWindow =
    "ERR invalid fa_window (-1 = none, 0 = full, W > 0)";
inline constexpr std::string_view kErrAttendQueryArgs =
    "ERR ATTEND.PREFIX.QUERY requires: session_id layer_id H D top_k Q_blob [fa_window]";
inline constexpr std::string_view kErrAttendQueryShape = "ERR invalid H/D/top_k (must be > 0)";
inline constexpr std::string_view kErrAttendQueryQ =
    "ERR Q blob size must be a positive multiple of H*D*4";
inline constexpr std::string_view kErrAttendQueryFailed =
    "ERR ATTEND.PREFIX.QUERY failed (session not found, or unsupported D)";
inline constexpr std::string_view kErrAttendFusedArgs =
    "ERR ATTEND.PREFIX.QUERY_FUSED requires: session_id layer_id H_q D S_suf H_kv Q K_suf V_suf "
    "head_map [fa_window]";
inline constexpr std::string_view kErrAttendFusedShape =
    "ERR invalid H_q/D/H_kv (must be > 0) or S_suf (>= 0)";
inline constexpr std::string_view kErrAttendGqa = "ERR H_q must be a multiple of H_kv (GQA)";
inline constexpr std::string_view kErrAttendFusedQ =
    "ERR Q blob size must be a positive multiple of H_q*D*4";
inline constexpr std::string_view kErrAttendSuffix =
    "ERR K_suf / V_suf size mismatch (expected H_kv*S_suf*D*4 each)";
inline constexpr std::string_view kErrAttendHeadMap =
    "ERR head_map size mismatch (expected H_q bytes)";
inline constexpr std::string_view kErrAttendRowsBeyondSuffix =
    "ERR Q has more rows than the suffix (M must be <= S_suf when S_suf > 0)";
inline constexpr std::string_view kErrAttendFusedFailed =
    "ERR ATTEND.PREFIX.QUERY_FUSED failed (session not found, GQA mismatch, or unsupported D)";
inline constexpr std::string_view kErrAttendSparseArgs =
    "ERR ATTEND.PREFIX.QUERY_SPARSE requires: session_id layer_id H D K_sparse_max Q indices "
    "counts [fa_window]";
inline constexpr std::string_view kErrAttendSparseShape =
    "ERR invalid H/D/K_sparse_max (must be > 0)";
inline constexpr std::string_view kErrAttendSparseQ = "ERR Q blob size must be H*D*4";
inline constexpr std::string_view kErrAttendSparseIndices =
    "ERR indices blob size must be H*K_sparse_max*4";
inline constexpr std::string_view kErrAttendSparseCounts = "ERR counts blob size must be H*4";
inline constexpr std::string_view kErrAttendSparseFailed =
    "ERR ATTEND.PREFIX.QUERY_SPARSE failed (session not found, K_sparse_max=0, or unsupported D)";
inline constexpr std::string_view kErrAttendAutoArgs =
    "ERR ATTEND.PREFIX.QUERY_SPARSE_AUTO requires: session_id layer_id H_q D B K_top H_kv Q "
    "head_map [fa_window]";
inline constexpr std::string_view kErrAttendAutoShape =
    "ERR invalid H_q/D/B/K_top/H_kv (must be > 0)";
inline constexpr std::string_view kErrAttendAutoQ = "ERR Q blob size must be H_q*D*4";
inline constexpr std::string_view kErrAttendAutoHeadMap =
    "ERR head_map size must be 0 (identity) or H_q bytes";
inline constexpr std::string_view kErrAttendAutoFailed =
    "ERR ATTEND.PREFIX.QUERY_SPARSE_AUTO failed (session not found, B=0, K_top=0, or unsupported "
    "D)";
inline constexpr std::string_view kErrAttendAutoFusedArgs =
    "ERR ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED requires: sid layer H_q D B K_top H_kv S_suf Q "
    "K_suf V_suf head_map [fa_window]";
inline constexpr std::string_view kErrAttendSuffixNegative = "ERR S_suf must be >= 0";
inline constexpr std::string_view kErrAttendAutoFusedFailed =
    "ERR ATTEND.PREFIX.QUERY_SPARSE_AUTO_FUSED failed (session not found, invalid params, or "
    "unsupported D)";
inline constexpr std::string_view kErrWarmArgs = "ERR KV.PREFIX.WARM requires: ns_key H D";
inline constexpr std::string_view kErrWarmShape = "ERR invalid H/D (1..256 / 1..512)";
// Keys and transactions (Redis' texts).
inline constexpr std::string_view kErrNoSuchKey = "ERR no such key";
inline constexpr std::string_view kErrRenameKvPrefix =
    "ERR RENAME of a pion-kvprefix key is not supported";
inline constexpr std::string_view kErrInvalidCursor = "ERR invalid cursor";
inline constexpr std::string_view kErrExpireNxCombo =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
inline constexpr std::string_view kErrExpireGtLt =
    "ERR GT and LT options at the same time are not compatible";
inline constexpr std::string_view kErrMultiNested = "ERR MULTI calls can not be nested";
inline constexpr std::string_view kErrExecWithoutMulti = "ERR EXEC without MULTI";
inline constexpr std::string_view kErrDiscardWithoutMulti = "ERR DISCARD without MULTI";
inline constexpr std::string_view kErrExecAbort =
    "EXECABORT Transaction discarded because of previous errors.";
// EXEC of a transaction holding a write that may use memory while the store is
// full (Redis's execCommandAbort text around its OOM error).
inline constexpr std::string_view kErrExecAbortOom =
    "EXECABORT Transaction discarded because of: OOM command not allowed when used memory > "
    "'maxmemory'.";
inline constexpr std::string_view kErrWatchInMulti = "ERR WATCH inside MULTI is not allowed";
inline constexpr std::string_view kErrNotInMulti = "ERR Command not allowed inside a transaction";

// CLUSTER / READONLY / READWRITE without --cluster-emulated (Redis's text).
inline constexpr std::string_view kErrClusterDisabled =
    "ERR This instance has cluster support disabled";
// A key of another type, as Redis words it: a string command on a namespace key or
// the reverse (Code::kWrongType); in the Redis module (src/module, docs/cluster.md)
// also the stored-rows loader of the AOF rewrite (PION.LOADROWS).
inline constexpr std::string_view kErrWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
// A V.* command redirected (ASK) to the node a namespace's slot is moving to, before
// the namespace arrived: cluster clients retry TRYAGAIN (it is not "session not found").
inline constexpr std::string_view kErrTryAgainMigrating =
    "TRYAGAIN the namespace is being migrated to this node: retry";
inline constexpr std::string_view kErrLoadRowsSide = "ERR PION.LOADROWS: side must be K or V";
inline constexpr std::string_view kErrLoadRowsBlob =
    "ERR PION.LOADROWS: stored_blob must be a positive multiple of the stored row size";

// Texts with a part from the request.
std::string InvalidExpireError(std::string_view cmd);       // invalid expire time in 'x' command
std::string UnsupportedOptionError(std::string_view opt);   // Unsupported option x
std::string HelloOptionError(std::string_view opt);         // Syntax error in HELLO option 'x'
std::string UnknownClientTypeError(std::string_view type);  // Unknown client type 'x'
// CLIENT TRACKING ... BCAST PREFIX: a prefix overlaps one the client has
// (`existing`) or another one given.
std::string TrackingPrefixOverlapError(std::string_view prefix, std::string_view other,
                                       bool existing);
std::string UnrecognizedOptionError(std::string_view opt);  // Unrecognized option 'x'
std::string NoSuchUserError(std::string_view user);         // No such user 'x' (CLIENT KILL USER)
std::string ClientSetInfoBadValueError(std::string_view attr);  // lib-name cannot contain ...
std::string UnknownVquantError(std::string_view name);  // KV.PREFIX.REGISTER: unknown vquant
std::string VquantDimError(std::string_view format);    // vquant x needs kv_dim % 32 == 0
std::string RegisterOptionError(std::string_view opt);  // KV.PREFIX.REGISTER unknown option
std::string FetchFormatError(std::string_view fmt);     // V.FETCH: unknown FMT 'x'
// CROSSSLOT (Redis module in a cluster): a namespace and its session ids must hash to one
// slot; the text names the namespace and tells to wrap it in a hash tag.
std::string CrossSlotNamespaceError(std::string_view ns);
// REGISTER ... PARENT refused: the parent's kv_dim differs; the namespace exists
// with another parent (`existing`, empty = none); the chain would be too long.
std::string ParentDimError(int64_t parent_dim);
std::string ParentMismatchError(std::string_view existing);
std::string ChainTooLongError(int64_t max_chain);
// "namespace already registered with kv_dim <d> vquant <format>".
std::string RegisteredOtherError(int64_t kv_dim, std::string_view format);
// ERR ATTEND.PREFIX.STORE failed (<why>); `why` names the bad value (an unsupported D,
// a non-finite element, no memory). The slot's refusals: AttendStoreError(Status) below.
std::string AttendStoreError(std::string_view why);
// CONFIG SET refused: unknown option, or "CONFIG SET failed (... 'name') - why".
std::string ConfigSetErrorText(const ConfigSetError& e);
// CONFIG SET maxclients above what RLIMIT_NOFILE allows.
std::string ConfigSetFdLimitError(uint64_t max_clients);
// CONFIG SET tier-maxbytes 0 (or above 16tb) while a disk tier is on.
std::string ConfigSetTierMaxbytesError();
// CONFIG SET tls-*: the new certificate, key or CA could not be loaded (`why`).
std::string ConfigSetTlsError(std::string_view why);
// CONFIG SET port: the new port could not be bound (Redis 7.0's words).
std::string ConfigSetPortError();
// "ERR <origin>:<line>: " in front of the reason an ACL file line is refused.
std::string AclFileLinePrefix(std::string_view origin, size_t line);

// ACL texts that quote the request.
std::string NoPermCommandError(std::string_view cmd);  // NOPERM ... run the 'x' command
std::string AclSetUserError(std::string_view rule, std::string_view why);
// ACL SETUSER: a selector "(" with no closing ")" (`arg`: the argument it opened at).
std::string AclUnmatchedParenthesisError(std::string_view arg);
std::string AclUserNotFoundError(std::string_view user);    // User 'x' not found
std::string AclCommandNotFoundError(std::string_view cmd);  // Command 'x' not found
std::string AclUnknownCategoryError(std::string_view cat);  // Unknown category 'x'
std::string AclDryRunCommandError(std::string_view cmd);    // ... run the 'x' command
std::string AclDryRunKeyError(std::string_view key);        // ... access the 'x' key
std::string AclDryRunChannelError(std::string_view ch);     // ... access the 'x' channel
// "ERR unknown subcommand or wrong number of arguments for 'sub'. Try CMD HELP."
std::string UnknownSubcommandOrArityError(std::string_view cmd, std::string_view sub);

// RESP2 subscribed mode: "ERR Can't execute '<cmd>': only (P|S)SUBSCRIBE / ...".
std::string PubSubContextError(std::string_view cmd);
// String edits, counters and bit commands (Redis 7.0's texts).
inline constexpr std::string_view kErrIncrOverflow = "ERR increment or decrement would overflow";
inline constexpr std::string_view kErrDecrOverflow = "ERR decrement would overflow";
inline constexpr std::string_view kErrNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kErrIncrNanInf = "ERR increment would produce NaN or Infinity";
inline constexpr std::string_view kErrStringTooBig =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
inline constexpr std::string_view kErrOffsetRange = "ERR offset is out of range";
inline constexpr std::string_view kErrBitOffset =
    "ERR bit offset is not an integer or out of range";
inline constexpr std::string_view kErrBitValue = "ERR bit is not an integer or out of range";
inline constexpr std::string_view kErrBitArg = "ERR The bit argument must be 1 or 0.";
inline constexpr std::string_view kErrBitopNot =
    "ERR BITOP NOT must be called with a single source key.";
inline constexpr std::string_view kErrBitfieldType =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 "
    "is.";
inline constexpr std::string_view kErrBitfieldOverflow = "ERR Invalid OVERFLOW type specified";
inline constexpr std::string_view kErrBitfieldRo =
    "ERR BITFIELD_RO only supports the GET subcommand";
inline constexpr std::string_view kErrLcsTypes =
    "ERR The specified keys must contain string values";
inline constexpr std::string_view kErrLcsLenIdx =
    "ERR If you want both the length and indexes, please just use IDX.";
inline constexpr std::string_view kErrLcsTooLong = "ERR String too long for LCS";
inline constexpr std::string_view kErrLcsMemory =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
// COPY / OBJECT (one database: DB 0 only).
inline constexpr std::string_view kErrSameObject =
    "ERR source and destination objects are the same";
inline constexpr std::string_view kErrDbIndexRange = "ERR DB index is out of range";
inline constexpr std::string_view kErrCopyKvPrefix =
    "ERR COPY of a pion-kvprefix key is not supported";
// DUMP / RESTORE.
inline constexpr std::string_view kErrDumpPayload =
    "ERR DUMP payload version or checksum are wrong";
inline constexpr std::string_view kErrBadDataFormat = "ERR Bad data format";
inline constexpr std::string_view kErrBusyKey = "BUSYKEY Target key name already exists.";
inline constexpr std::string_view kErrRestoreTtl = "ERR Invalid TTL value, must be >= 0";
inline constexpr std::string_view kErrRestoreIdle = "ERR Invalid IDLETIME value, must be >= 0";
inline constexpr std::string_view kErrRestoreFreq =
    "ERR Invalid FREQ value, must be >= 0 and <= 255";
inline constexpr std::string_view kErrDumpKvPrefix =
    "ERR DUMP of a pion-kvprefix key is not supported";
inline constexpr std::string_view kErrObjectFreq =
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that "
    "when switching between policies at runtime LRU and LFU data will take some time to adjust.";

// "-ERR wrong number of arguments for '<cmd>' command" (without the '-').
std::string WrongArity(std::string_view cmd);
// "ERR unknown command '<name>', with args beginning with: '<a1>' ... " exactly
// as Redis 7 words it (name truncated to 128 bytes, args to 128 bytes in all).
std::string UnknownCommandError(std::span<const std::string_view> args);
// "ERR unknown subcommand '<sub>'. Try <CMD> HELP."
std::string UnknownSubcommandError(std::string_view cmd, std::string_view sub);

// The fast lane (src/server/fastlane.h): a frame body that does not follow its
// command's layout, "ERR Protocol error: malformed fast-lane <CMD> frame body
// (<what>)"; the connection closes after it.
std::string FrameBodyError(std::string_view cmd, std::string_view what);
// The transport's texts that commands send too (src/net/resp_errors.h: constants
// only, no net code).
using net::kErrClientMemory;
using net::kErrNoMemory;
inline constexpr std::string_view kErrOom =
    "OOM command not allowed when used memory > 'maxmemory'.";
// ---------------------------------------------------------------- Reasons
// The reply of a failed store, attend or quant call: (code, reason, fields) ->
// text, the only place where their failures are worded (their Status messages
// are for logs). A Status without a reason gets the code word its Code implies
// and its message: kOutOfBudget -> OOM (kErrOom when the message is empty),
// kLoading -> LOADING, kWrongType -> kErrWrongType, every other code -> ERR.
// Every reason has a row below, as -Wswitch checks.
std::string StatusToError(const Status& st);
// What the reason says, without code word or command frame ("non-finite value in
// row 3", "slot of 9 bytes exceeds attend-maxmemory (8)"); the message when the
// status has no reason.
std::string ReasonText(const Status& st);
// ATTEND.PREFIX.STORE refused by the slot (attend::Reason): "OOM ATTEND.PREFIX.STORE:
// <why>" for OutOfBudget, else "ERR ATTEND.PREFIX.STORE failed (<why>)".
std::string AttendStoreError(const Status& st);
// The store's texts without a constant elsewhere in this file.
inline constexpr std::string_view kErrKeyTooLong = "ERR key too long";
inline constexpr std::string_view kErrEditRange = "ERR edit out of range";
inline constexpr std::string_view kErrValueNoMemory = "OOM out of memory";
inline constexpr std::string_view kErrTierStopped = "ERR tier stopped";
inline constexpr std::string_view kErrTierStoppedBusy = "ERR disk tier stopped";
inline constexpr std::string_view kErrTierChanged =
    "ERR value changed on the disk tier while it was read, try again";
inline constexpr std::string_view kErrNamespaceAbsent = "ERR namespace not present";

}  // namespace pion::server
