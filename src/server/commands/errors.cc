#include "server/commands/errors.h"

#include "base/strutil.h"
#include "server/config.h"

namespace pion::server {

namespace {
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
std::string ParentDimError(std::string_view parent_dim) {
  std::string s = "ERR PARENT namespace has kv_dim ";
  s.append(parent_dim);
  s += " (a chain keeps one kv_dim)";
  return s;
}
std::string ParentMismatchError(std::string_view existing) {
  if (existing.empty()) return "ERR namespace already registered without a PARENT";
  return Quoted("ERR namespace already registered with PARENT ", existing, "");
}
std::string StatusToError(const Status& st) {
  if (st.id() == ErrorId::kBlockQuantized) return std::string(kErrBlockQuantized);
  return net::StatusToError(st);
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

std::string ChainNonFiniteError(size_t index, std::string_view codec_message) {
  std::string s = "ERR value " + std::to_string(index) + ": ";
  s += codec_message;
  s += " (only FORMAT fp16 stores inf and NaN)";
  return s;
}

std::string ChainTooLongError(std::string_view max_chain) {
  std::string s = "ERR PARENT chain too long (at most ";
  s.append(max_chain);
  s += " namespaces: max-chain-length)";
  return s;
}
std::string FetchFormatError(std::string_view fmt) {
  return Quoted("ERR V.FETCH: unknown FMT ", fmt, " (want NATIVE|F32|F16)");
}
std::string StoreBatchError(std::string_view why) {
  std::string s = "ERR V.STOREBATCH: ";
  s.append(why);
  return s;
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
std::string AttendStoreOomError(std::string_view why) {
  std::string s = "OOM ATTEND.PREFIX.STORE: ";
  s.append(why);
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
