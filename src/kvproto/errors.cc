#include "kvproto/errors.h"

#include <cinttypes>
#include <cstdio>

#include "attend/reason.h"
#include "base/strutil.h"
#include "kvproto/config_error.h"
#include "quant/format.h"
#include "quant/reason.h"
#include "store/reason.h"

namespace pion::server {

namespace {
// A Status without a reason: the code word its Code implies, then its message.
std::string CodeLine(const Status& st) {
  if (st.code() == Code::kWrongType) return std::string(kErrWrongType);
  if (st.code() == Code::kOutOfBudget && st.message().empty()) return std::string(kErrOom);
  std::string_view word = st.code() == Code::kOutOfBudget ? "OOM"
                          : st.code() == Code::kLoading   ? "LOADING"
                                                          : "ERR";
  std::string s(word);
  s += ' ';
  s.append(st.message());
  return s;
}

std::string Quoted(std::string_view prefix, std::string_view arg, std::string_view suffix = "") {
  std::string s(prefix);
  s += '\'';
  s.append(arg);
  s += '\'';
  s.append(suffix);
  return s;
}
}  // namespace

std::string NoPermCommandError(std::string_view cmd) {
  return Quoted("NOPERM this user has no permissions to run the ", ToLower(cmd), " command");
}
std::string AclSetUserError(std::string_view rule, std::string_view why) {
  return Quoted("ERR Error in ACL SETUSER modifier ", rule, ": " + std::string(why));
}
std::string AclUnmatchedParenthesisError(std::string_view arg) {
  return Quoted("ERR Unmatched parenthesis in acl selector starting at ", arg, ".");
}
std::string AclUserNotFoundError(std::string_view user) {
  return Quoted("ERR User ", user, " not found");
}
std::string AclCommandNotFoundError(std::string_view cmd) {
  return Quoted("ERR Command ", cmd, " not found");
}
std::string AclUnknownCategoryError(std::string_view cat) {
  return Quoted("ERR Unknown category ", cat);
}
std::string AclDryRunCommandError(std::string_view cmd) {
  return Quoted("This user has no permissions to run the ", ToLower(cmd), " command");
}
std::string AclDryRunKeyError(std::string_view key) {
  return Quoted("This user has no permissions to access the ", key, " key");
}
std::string AclDryRunChannelError(std::string_view ch) {
  return Quoted("This user has no permissions to access the ", ch, " channel");
}
std::string UnknownSubcommandOrArityError(std::string_view cmd, std::string_view sub) {
  return Quoted("ERR unknown subcommand or wrong number of arguments for ", sub,
                ". Try " + ToUpper(cmd) + " HELP.");
}
std::string PubSubContextError(std::string_view cmd) {
  std::string s = "ERR Can't execute '";
  s.append(cmd);
  s += "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
       "context";
  return s;
}
std::string HelloOptionError(std::string_view opt) {
  return Quoted("ERR Syntax error in HELLO option ", opt);
}
std::string UnknownClientTypeError(std::string_view type) {
  return Quoted("ERR Unknown client type ", type);
}
std::string TrackingPrefixOverlapError(std::string_view prefix, std::string_view other,
                                       bool existing) {
  std::string s = "ERR Prefix '";
  s.append(prefix);
  s += existing ? "' overlaps with an existing prefix '"
                : "' overlaps with another provided prefix '";
  s.append(other);
  s += "'. Prefixes for a single client must not overlap.";
  return s;
}
std::string NoSuchUserError(std::string_view user) { return Quoted("ERR No such user ", user); }
std::string UnrecognizedOptionError(std::string_view opt) {
  return Quoted("ERR Unrecognized option ", opt);
}
std::string ClientSetInfoBadValueError(std::string_view attr) {
  return "ERR " + ToLower(attr) + " cannot contain spaces, newlines or special characters.";
}
std::string UnknownVquantError(std::string_view name) {
  return Quoted("ERR KV.PREFIX.REGISTER: unknown vquant ", name,
                " (want int8|turbo4|turbo3|turbo2|fp16|fp8|mlx4g32)");
}
std::string VquantDimError(std::string_view format) {
  std::string s = "ERR vquant ";
  s.append(format);
  s += " needs kv_dim divisible by 32";
  return s;
}
std::string RegisterOptionError(std::string_view opt) {
  return Quoted("ERR KV.PREFIX.REGISTER unknown option ", opt, " (BLOCKS, PREFILL_MS, PARENT)");
}
std::string ParentDimError(int64_t parent_dim) {
  return "ERR PARENT namespace has kv_dim " + std::to_string(parent_dim) +
         " (a chain keeps one kv_dim)";
}
std::string ParentMismatchError(std::string_view existing) {
  if (existing.empty()) return "ERR namespace already registered without a PARENT";
  return Quoted("ERR namespace already registered with PARENT ", existing, "");
}
std::string RegisteredOtherError(int64_t kv_dim, std::string_view format) {
  std::string s = "ERR namespace already registered with kv_dim " + std::to_string(kv_dim);
  s += " vquant ";
  s.append(format);
  return s;
}

// ---------------------------------------------------------------- Reasons
namespace {

std::string_view FormatNameOf(int64_t f) {
  return quant::FormatName(static_cast<quant::Format>(f));
}

std::string Line(std::string_view word, std::string_view text) {
  std::string s(word);
  s += ' ';
  s.append(text);
  return s;
}

// store::Reason -> the whole reply line.
std::string StoreError(const Status& st, store::Reason r) {
  using store::Reason;
  switch (r) {
    case Reason::kNone:
      break;
    case Reason::kSessionNotFound:
      return std::string(kErrSessionNotFound);
    case Reason::kSizeMismatch: {
      // StoreRows' one replying caller is V.STOREBATCH: its frame is part of the text.
      const int64_t got = st.field(0), count = st.field(1), dim = st.field(2), elem = st.field(3);
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "ERR V.STOREBATCH: blob size %" PRId64 " != expected %" PRId64
                    " (count=%" PRId64 " x kv_dim=%" PRId64 " x %" PRId64 ")",
                    got, count * dim * elem, count, dim, elem);
      return buf;
    }
    case Reason::kNothingStored:
      return std::string(kErrFetchBatchNoLayers);
    case Reason::kRegisteredOther:
      return RegisteredOtherError(st.field(0), FormatNameOf(st.field(1)));
    case Reason::kParentNotFound:
      return std::string(kErrParentNotFound);
    case Reason::kParentDim:
      return ParentDimError(st.field(0));
    case Reason::kParentMismatch:
      return ParentMismatchError(st.name());
    case Reason::kChainTooLong:
      return ChainTooLongError(st.field(0));
    case Reason::kDropRefused:  // a key the user may not write (commands answer DenyKey's)
      return std::string(kErrNoPermKey);
    case Reason::kKeyTooLong:
      return std::string(kErrKeyTooLong);
    case Reason::kEditRange:
      return std::string(kErrEditRange);
    case Reason::kStringTooBig:
      return std::string(kErrStringTooBig);
    case Reason::kNoMemory:
      return std::string(kErrValueNoMemory);
    case Reason::kNoSuchKey:
      return std::string(kErrNoSuchKey);
    case Reason::kRenameNamespace:
      return std::string(kErrRenameKvPrefix);
    case Reason::kCopyNamespace:
      return std::string(kErrCopyKvPrefix);
    case Reason::kBlockQuantized:
      return std::string(kErrBlockQuantized);
    case Reason::kTierStopped:
      return std::string(st.code() == Code::kBusy ? kErrTierStoppedBusy : kErrTierStopped);
    case Reason::kTierChanged:
      return std::string(kErrTierChanged);
    case Reason::kReplayNamespaceAbsent:
      return std::string(kErrNamespaceAbsent);
  }
  return CodeLine(st);
}

// attend::Reason -> what it says (no code word).
std::string AttendText(const Status& st, attend::Reason r) {
  using attend::Reason;
  const auto n = [&](size_t i) { return std::to_string(st.field(i)); };
  const auto row = [&](std::string_view what) {
    std::string s(what);
    s += st.field(0) == static_cast<int64_t>(attend::Tensor::kV) ? " V" : " K";
    return s + " head " + n(1) + " token " + n(2);
  };
  switch (r) {
    case Reason::kNone:
      break;
    case Reason::kNonFinite:
      return row("non-finite value in");
    case Reason::kF16Range:
      return row("value beyond the f16 range in");
    case Reason::kHeadsRange:
      return "H must be 1.." + n(0);
    case Reason::kHeadDimRange:
      return "D must be 1.." + n(0);
    case Reason::kRowSize:
      return "H*D " + n(0) + " is not a valid " + std::string(FormatNameOf(st.field(1))) +
             " row size";
    case Reason::kRowCountDiffer:
      return "K has " + n(0) + " rows, V has " + n(1);
    case Reason::kTooManyRows:
      return "too many rows";
    case Reason::kNoMemory:
      return "cannot allocate the slot";
    case Reason::kSlotTooBig:
      return "slot of " + n(0) + " bytes exceeds attend-maxmemory (" + n(1) + ")";
    case Reason::kNoSlots:
      return "attend-max-slots is 0";
    case Reason::kSlotEmpty:
      return "slot holds no K/V";
    case Reason::kMissingQ:
      return "missing Q";
    case Reason::kQueryHeadsRange:
      return "H_q must be 1.." + n(0);
    case Reason::kQueryRowsRange:
      return "M must be 1.." + n(0);
    case Reason::kHeadDimMismatch:
      return "D " + n(0) + " does not match the slot's " + n(1);
    case Reason::kKvHeadsMismatch:
      return "H_kv " + n(0) + " does not match the slot's " + n(1);
    case Reason::kWindowNegative:
      return "window must be >= 0";
    case Reason::kHeadMapRange:
      return "head_map[" + n(0) + "] out of range";
    case Reason::kGqaMismatch:
      return "H_q must be a multiple of H_kv without a head_map";
    case Reason::kNonFiniteQ:
      return "non-finite value in Q";
    case Reason::kSuffixTooLong:
      return "suffix too long";
    case Reason::kMissingSuffix:
      return "missing suffix K/V";
    case Reason::kRowsBeyondSuffix:
      return "M must be <= the suffix length";
    case Reason::kNonFiniteSuffix:
      return "non-finite value in the suffix K/V";
    case Reason::kSparseExclusive:
      return "explicit indices and sparse auto are exclusive";
    case Reason::kSparseIncomplete:
      return "sparse needs both indices and counts";
    case Reason::kSparseCountRange:
      return "count of head " + n(0) + " must be 0..K_sparse_max";
    case Reason::kSparseIndexRange:
      return "sparse index " + n(0) + " out of range [0, " + n(1) + ")";
    case Reason::kBlockSize:
      return "block size must be >= 1";
    case Reason::kKTop:
      return "K_top must be >= 1";
    case Reason::kUnknownSelector:
      return "unknown selector";
    case Reason::kNotSparseAuto:
      return "not a sparse auto request";
  }
  return std::string(st.message());
}

// quant::Reason -> what it says (no code word).
std::string QuantText(const Status& st, quant::Reason r) {
  switch (r) {
    case quant::Reason::kNone:
      break;
    case quant::Reason::kNonFinite:
      return "non-finite value in row " + std::to_string(st.field(0));
  }
  return std::string(st.message());
}

// The code word of a reasoned status whose text has none of its own.
std::string_view CodeWord(const Status& st) {
  return st.code() == Code::kOutOfBudget ? "OOM" : "ERR";
}

}  // namespace

std::string StatusToError(const Status& st) {
  if (auto r = st.reason<store::Reason>(); r != store::Reason::kNone) return StoreError(st, r);
  if (auto r = st.reason<attend::Reason>(); r != attend::Reason::kNone)
    return Line(CodeWord(st), AttendText(st, r));
  if (auto r = st.reason<quant::Reason>(); r != quant::Reason::kNone)
    return Line(CodeWord(st), QuantText(st, r));
  return CodeLine(st);
}

std::string ReasonText(const Status& st) {
  if (auto r = st.reason<attend::Reason>(); r != attend::Reason::kNone) return AttendText(st, r);
  if (auto r = st.reason<quant::Reason>(); r != quant::Reason::kNone) return QuantText(st, r);
  if (st.reason<store::Reason>() != store::Reason::kNone) {
    std::string line = StatusToError(st);  // the store's texts are whole lines
    const size_t sp = line.find(' ');
    return sp == std::string::npos ? line : line.substr(sp + 1);
  }
  return std::string(st.message());
}

std::string AttendStoreError(const Status& st) {
  if (st.code() == Code::kOutOfBudget) return "OOM ATTEND.PREFIX.STORE: " + ReasonText(st);
  return AttendStoreError(ReasonText(st));
}

std::string ChainRowError(std::string_view format, uint32_t multiple, uint32_t max_row) {
  std::string s = "ERR ROW must be 1.." + std::to_string(max_row);
  if (multiple > 1) s += " and a multiple of " + std::to_string(multiple);
  s += " for FORMAT ";
  s += format;
  return s;
}

std::string ChainValueLengthError(size_t index, size_t row_bytes) {
  return "ERR value " + std::to_string(index) +
         " is not a whole number of rows (ROW x DTYPE = " + std::to_string(row_bytes) + " bytes)";
}

std::string ChainNonFiniteError(size_t index, const Status& st) {
  std::string s = "ERR value " + std::to_string(index) + ": ";
  s += ReasonText(st);
  s += " (only FORMAT fp16 stores inf and NaN)";
  return s;
}

std::string ChainTooLongError(int64_t max_chain) {
  return "ERR PARENT chain too long (at most " + std::to_string(max_chain) +
         " namespaces: max-chain-length)";
}
std::string FetchFormatError(std::string_view fmt) {
  return Quoted("ERR V.FETCH: unknown FMT ", fmt, " (want NATIVE|F32|F16)");
}

std::string CrossSlotNamespaceError(std::string_view ns) {
  // The name goes into an error line: no CR/LF or other control bytes.
  std::string name;
  for (char c : ns.substr(0, 128)) name += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
  std::string s = "CROSSSLOT namespace '" + name + "' and its session ids '" + name + "_pk'/'" +
                  name + "_pv' hash to different cluster slots: put the namespace in a hash tag, ";
  s += "e.g. '{" + name + "}'";
  return s;
}

std::string AttendStoreError(std::string_view why) {
  std::string s = "ERR ATTEND.PREFIX.STORE failed (";
  s.append(why);
  s += ')';
  return s;
}

namespace {
std::string ConfigSetFailed(std::string_view name, std::string_view why) {
  std::string s = Quoted("ERR CONFIG SET failed (possibly related to argument ", name, ") - ");
  s.append(why);
  return s;
}
}  // namespace

std::string ConfigSetErrorText(const ConfigSetError& e) {
  switch (e.kind) {
    case ConfigSetError::kUnknown:
      return Quoted("ERR Unknown option or number of args for CONFIG SET - ", e.name);
    case ConfigSetError::kDuplicate:
      return ConfigSetFailed(e.name, "duplicate parameter");
    case ConfigSetError::kImmutable:
      return ConfigSetFailed(e.name, "can't set immutable config");
    case ConfigSetError::kInvalid:
    case ConfigSetError::kNone:
      break;
  }
  return ConfigSetFailed(e.name, e.detail);
}

std::string ConfigSetFdLimitError(uint64_t max_clients) {
  return ConfigSetFailed("maxclients", "the open file limit (ulimit -n) allows at most " +
                                           std::to_string(max_clients) + " clients");
}

std::string ConfigSetTierMaxbytesError() {
  return "ERR CONFIG SET failed (possibly related to argument 'tier-maxbytes') - the disk tier "
         "needs 1 byte to 16tb while tier-dir is set";
}

std::string ConfigSetTlsError(std::string_view why) {
  return "ERR CONFIG SET failed - Unable to update TLS configuration: " + std::string(why);
}

std::string ConfigSetPortError() {
  return ConfigSetFailed("port", "Unable to listen on this port");
}

std::string AclFileLinePrefix(std::string_view origin, size_t line) {
  return "ERR " + std::string(origin) + ":" + std::to_string(line) + ": ";
}

std::string UnknownCommandError(std::span<const std::string_view> args) {
  std::string s = "ERR unknown command '";
  s.append(args[0].substr(0, 128));
  s += "', with args beginning with: ";
  std::string a;
  for (size_t i = 1; i < args.size() && a.size() < 128; ++i) {
    size_t room = 128 - a.size();
    a += '\'';
    a.append(args[i].substr(0, room));
    a += "' ";
  }
  s += a;
  return s;
}

std::string UnknownSubcommandError(std::string_view cmd, std::string_view sub) {
  std::string s = "ERR unknown subcommand '";
  s.append(sub.substr(0, 128));
  s += "'. Try ";
  s += ToUpper(cmd);
  s += " HELP.";
  return s;
}

std::string WrongArity(std::string_view cmd) {
  std::string s = "ERR wrong number of arguments for '";
  s += ToLower(cmd);
  s += "' command";
  return s;
}

std::string FrameBodyError(std::string_view cmd, std::string_view what) {
  std::string s = "ERR Protocol error: malformed fast-lane ";
  s.append(cmd);
  s += " frame body (";
  s.append(what);
  s += ')';
  return s;
}

std::string InvalidExpireError(std::string_view cmd) {
  return "ERR invalid expire time in '" + std::string(cmd) + "' command";
}

std::string UnsupportedOptionError(std::string_view opt) {
  return "ERR Unsupported option " + std::string(opt.substr(0, 128));
}

}  // namespace pion::server
