#include "server/commands/command_docs.h"

#include <cctype>
#include <iterator>

#include "base/strutil.h"
#include "kvproto/pion_commands.h"

namespace pion::server {

namespace {

// Groups as Redis names them. pion's own commands come from their one table
// (kvproto/pion_commands.h), in group "pion".
const CommandDoc kDocs[] = {
    // connection
    {"PING", "connection", "1.0.0", "[message]", nullptr},
    {"ECHO", "connection", "1.0.0", "message", nullptr},
    {"HELLO", "connection", "6.0.0", "[protover [AUTH username password] [SETNAME clientname]]",
     nullptr},
    {"AUTH", "connection", "1.0.0", "[username] password", nullptr},
    {"SELECT", "connection", "1.0.0", "index", nullptr},
    {"QUIT", "connection", "1.0.0", "", nullptr},
    {"RESET", "connection", "6.2.0", "", nullptr},
    {"CLIENT", "connection", "2.4.0", "", nullptr},
    {"CLIENT|ID", "connection", "5.0.0", "", "Returns the unique client ID of the connection."},
    {"CLIENT|GETNAME", "connection", "2.6.9", "", "Returns the name of the connection."},
    {"CLIENT|SETNAME", "connection", "2.6.9", "connection-name", "Sets the connection name."},
    {"CLIENT|INFO", "connection", "6.2.0", "", "Returns information about the connection."},
    {"CLIENT|LIST", "connection", "2.4.0",
     "[TYPE NORMAL | MASTER | REPLICA | PUBSUB] [ID client-id...]", "Lists open connections."},
    {"CLIENT|KILL", "connection", "2.4.0",
     "[ip:port] [ID client-id] [TYPE NORMAL | MASTER | REPLICA | PUBSUB] [USER username] "
     "[ADDR ip:port] [LADDR ip:port] [SKIPME YES | NO] [MAXAGE maxage]",
     "Terminates open connections."},
    {"CLIENT|NO-EVICT", "connection", "7.0.0", "ON | OFF",
     "Accepted for compatibility (pion never evicts clients)."},
    {"CLIENT|NO-TOUCH", "connection", "7.2.0", "ON | OFF", "Accepted for compatibility."},
    {"CLIENT|SETINFO", "connection", "7.2.0", "LIB-NAME libname | LIB-VER libver",
     "Sets the client library name or version (shown by CLIENT LIST)."},
    {"CLIENT|REPLY", "connection", "3.2.0", "ON | OFF | SKIP",
     "Turns replies to this connection's commands on, off or off for the next one."},
    {"CLIENT|PAUSE", "connection", "3.0.0", "timeout [WRITE | ALL]",
     "Suspends commands processing (every command, or the writes) for a while."},
    {"CLIENT|UNPAUSE", "connection", "6.2.0", "", "Resumes processing of paused clients."},
    {"CLIENT|UNBLOCK", "connection", "5.0.0", "client-id [TIMEOUT | ERROR]",
     "Unblocks a client blocked by a blocking command (pion has none: always 0)."},
    {"CLIENT|TRACKING", "connection", "6.0.0",
     "ON | OFF [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] "
     "[OPTOUT] [NOLOOP]",
     "Controls server-assisted client-side caching for the connection."},
    {"CLIENT|CACHING", "connection", "6.0.0", "YES | NO",
     "Instructs the server whether to track the keys in the next request."},
    {"CLIENT|GETREDIR", "connection", "6.0.0", "",
     "Returns the client ID to which the connection's tracking notifications are redirected."},
    {"CLIENT|TRACKINGINFO", "connection", "6.2.0", "",
     "Returns information about server-assisted client-side caching for the connection."},
    {"CLIENT|HELP", "connection", "5.0.0", "", "Returns helpful text about the subcommands."},
    // pubsub
    {"SUBSCRIBE", "pubsub", "2.0.0", "channel [channel ...]", nullptr},
    {"UNSUBSCRIBE", "pubsub", "2.0.0", "[channel [channel ...]]", nullptr},
    {"PSUBSCRIBE", "pubsub", "2.0.0", "pattern [pattern ...]", nullptr},
    {"PUNSUBSCRIBE", "pubsub", "2.0.0", "[pattern [pattern ...]]", nullptr},
    {"SSUBSCRIBE", "pubsub", "7.0.0", "shardchannel [shardchannel ...]", nullptr},
    {"SUNSUBSCRIBE", "pubsub", "7.0.0", "[shardchannel [shardchannel ...]]", nullptr},
    {"PUBLISH", "pubsub", "2.0.0", "channel message", nullptr},
    {"SPUBLISH", "pubsub", "7.0.0", "shardchannel message", nullptr},
    {"PUBSUB", "pubsub", "2.8.0", "", nullptr},
    {"PUBSUB|CHANNELS", "pubsub", "2.8.0", "[pattern]", "Returns the active channels."},
    {"PUBSUB|NUMSUB", "pubsub", "2.8.0", "[channel [channel ...]]",
     "Returns a count of subscribers to channels."},
    {"PUBSUB|NUMPAT", "pubsub", "2.8.0", "", "Returns a count of unique pattern subscriptions."},
    {"PUBSUB|SHARDCHANNELS", "pubsub", "7.0.0", "[pattern]", "Returns the active shard channels."},
    {"PUBSUB|SHARDNUMSUB", "pubsub", "7.0.0", "[shardchannel [shardchannel ...]]",
     "Returns the count of subscribers of shard channels."},
    {"PUBSUB|HELP", "pubsub", "6.2.0", "", "Returns helpful text about the subcommands."},
    // server
    {"COMMAND", "server", "2.8.13", "", nullptr},
    {"COMMAND|COUNT", "server", "2.8.13", "", "Returns a count of commands."},
    {"COMMAND|INFO", "server", "2.8.13", "[command-name...]",
     "Returns information about commands."},
    {"COMMAND|DOCS", "server", "7.0.0", "[command-name...]",
     "Returns documentary information about commands."},
    {"COMMAND|LIST", "server", "7.0.0",
     "[FILTERBY MODULE module-name | ACLCAT category | PATTERN pattern]",
     "Returns a list of command names."},
    {"COMMAND|GETKEYS", "server", "2.8.13", "command [arg...]",
     "Extracts the key names from an arbitrary command."},
    {"COMMAND|GETKEYSANDFLAGS", "server", "7.0.0", "command [arg...]",
     "Extracts the key names and access flags from an arbitrary command."},
    {"COMMAND|HELP", "server", "5.0.0", "", "Returns helpful text about the subcommands."},
    {"CONFIG", "server", "2.0.0", "", nullptr},
    {"CONFIG|GET", "server", "2.0.0", "parameter...", "Returns the effective values of settings."},
    {"CONFIG|SET", "server", "2.0.0", "parameter value [parameter value ...]",
     "Sets settings at run time."},
    {"CONFIG|RESETSTAT", "server", "2.0.0", "", "Resets the server's statistics."},
    {"CONFIG|REWRITE", "server", "2.8.0", "", "Not supported by pion."},
    {"CONFIG|HELP", "server", "5.0.0", "", "Returns helpful text about the subcommands."},
    {"INFO", "server", "1.0.0", "[section...]", nullptr},
    {"DBSIZE", "server", "1.0.0", "", nullptr},
    {"FLUSHALL", "server", "1.0.0", "[ASYNC | SYNC]", nullptr},
    {"FLUSHDB", "server", "1.0.0", "[ASYNC | SYNC]", nullptr},
    {"SHUTDOWN", "server", "1.0.0", "[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]", nullptr},
    {"TIME", "server", "2.6.0", "", nullptr},
    {"ROLE", "server", "2.8.12", "", nullptr},
    // --cluster-emulated (commands/cluster.cc, docs/cluster.md).
    {"CLUSTER", "cluster", "3.0.0", "", nullptr},
    {"CLUSTER|SLOTS", "cluster", "3.0.0", "", "Returns the slot ranges and their node."},
    {"CLUSTER|SHARDS", "cluster", "7.0.0", "", "Returns the shards of the cluster."},
    {"CLUSTER|NODES", "cluster", "3.0.0", "", "Returns the cluster configuration of a node."},
    {"CLUSTER|INFO", "cluster", "3.0.0", "", "Returns information about the cluster state."},
    {"CLUSTER|MYID", "cluster", "3.0.0", "", "Returns the ID of a node."},
    {"CLUSTER|KEYSLOT", "cluster", "3.0.0", "key", "Returns the hash slot of a key."},
    {"CLUSTER|HELP", "cluster", "5.0.0", "", "Returns helpful text about the subcommands."},
    {"READONLY", "cluster", "3.0.0", "", nullptr},
    {"READWRITE", "cluster", "3.0.0", "", nullptr},
    {"ACL", "server", "6.0.0", "", nullptr},
    {"ACL|SETUSER", "server", "6.0.0", "username [rule...]",
     "Creates and modifies an ACL user and its rules."},
    {"ACL|GETUSER", "server", "6.0.0", "username", "Lists the ACL rules of a user."},
    {"ACL|DELUSER", "server", "6.0.0", "username...", "Deletes ACL users."},
    {"ACL|LIST", "server", "6.0.0", "", "Dumps the effective rules in ACL file format."},
    {"ACL|USERS", "server", "6.0.0", "", "Lists all ACL users."},
    {"ACL|WHOAMI", "server", "6.0.0", "", "Returns the user the connection is authenticated as."},
    {"ACL|CAT", "server", "6.0.0", "[category]",
     "Lists the ACL categories, or the commands inside a category."},
    {"ACL|DRYRUN", "server", "7.0.0", "username command [arg...]",
     "Simulates the execution of a command by a user without executing it."},
    {"ACL|LOG", "server", "6.0.0", "[count | RESET]", "Lists recent security events."},
    {"ACL|LOAD", "server", "6.0.0", "", "Reloads the rules from the ACL file."},
    {"ACL|SAVE", "server", "6.0.0", "", "Saves the effective ACL rules in the ACL file."},
    {"ACL|GENPASS", "server", "6.0.0", "[bits]", "Generates a secure pseudorandom password."},
    {"ACL|HELP", "server", "6.0.0", "", "Returns helpful text about the subcommands."},
    {"LASTSAVE", "server", "1.0.0", "", nullptr},
    {"MONITOR", "server", "1.0.0", "", nullptr},
    {"SLOWLOG", "server", "2.2.12", "", nullptr},
    {"SLOWLOG|GET", "server", "2.2.12", "[count]", "Returns the slow log's entries."},
    {"SLOWLOG|LEN", "server", "2.2.12", "", "Returns the number of entries in the slow log."},
    {"SLOWLOG|RESET", "server", "2.2.12", "", "Clears all entries from the slow log."},
    {"SLOWLOG|HELP", "server", "6.2.0", "", "Shows helpful text about the subcommands."},
    {"LATENCY", "server", "2.8.13", "", nullptr},
    {"LATENCY|LATEST", "server", "2.8.13", "",
     "Returns the latest latency samples for all events."},
    {"LATENCY|HISTORY", "server", "2.8.13", "event",
     "Returns timestamp-latency samples for an event."},
    {"LATENCY|RESET", "server", "2.8.13", "[event...]",
     "Resets the latency data for one or more events."},
    {"LATENCY|DOCTOR", "server", "2.8.13", "", "Returns a human-readable latency analysis report."},
    {"LATENCY|HISTOGRAM", "server", "7.0.0", "[command [command ...]]",
     "Returns the cumulative distribution of latencies of a subset or all commands."},
    {"LATENCY|HELP", "server", "2.8.13", "", "Returns helpful text about the subcommands."},
    // the string keyspace (reported once the server has them)
    {"GET", "string", "1.0.0", "key", nullptr},
    {"SET", "string", "1.0.0",
     "key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds | "
     "PXAT unix-time-milliseconds | KEEPTTL]",
     nullptr},
    {"SETEX", "string", "2.0.0", "key seconds value", nullptr},
    {"PSETEX", "string", "2.6.0", "key milliseconds value", nullptr},
    {"SETNX", "string", "1.0.0", "key value", nullptr},
    {"GETDEL", "string", "6.2.0", "key", nullptr},
    {"GETEX", "string", "6.2.0",
     "key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | "
     "PERSIST]",
     nullptr},
    {"MGET", "string", "1.0.0", "key...", nullptr},
    {"MSET", "string", "1.0.1", "(key value)...", nullptr},
    {"MSETNX", "string", "1.0.1", "(key value)...", nullptr},
    {"APPEND", "string", "2.0.0", "key value", nullptr},
    {"STRLEN", "string", "2.2.0", "key", nullptr},
    {"GETRANGE", "string", "2.4.0", "key start end", nullptr},
    {"SUBSTR", "string", "1.0.0", "key start end", nullptr},
    {"INCR", "string", "1.0.0", "key", nullptr},
    {"INCRBY", "string", "1.0.0", "key increment", nullptr},
    {"DECR", "string", "1.0.0", "key", nullptr},
    {"DECRBY", "string", "1.0.0", "key decrement", nullptr},
    {"INCRBYFLOAT", "string", "2.6.0", "key increment", nullptr},
    {"GETSET", "string", "1.0.0", "key value", nullptr},
    {"SETRANGE", "string", "2.2.0", "key offset value", nullptr},
    {"LCS", "string", "7.0.0", "key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]", nullptr},
    {"SETBIT", "bitmap", "2.2.0", "key offset value", nullptr},
    {"GETBIT", "bitmap", "2.2.0", "key offset", nullptr},
    {"BITCOUNT", "bitmap", "2.6.0", "key [start end [BYTE | BIT]]", nullptr},
    {"BITPOS", "bitmap", "2.8.7", "key bit [start [end [BYTE | BIT]]]", nullptr},
    {"BITOP", "bitmap", "2.6.0", "operation destkey key...", nullptr},
    {"BITFIELD", "bitmap", "3.2.0",
     "key [GET encoding offset | OVERFLOW (WRAP | SAT | FAIL) | SET encoding offset value | "
     "INCRBY encoding offset increment]...",
     nullptr},
    {"BITFIELD_RO", "bitmap", "6.0.0", "key [GET encoding offset]...", nullptr},
    {"COPY", "generic", "6.2.0", "source destination [DB destination-db] [REPLACE]", nullptr},
    {"TOUCH", "generic", "3.2.1", "key...", nullptr},
    {"DUMP", "generic", "2.6.0", "key", nullptr},
    {"RESTORE", "generic", "2.6.0",
     "key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]", nullptr},
    {"OBJECT", "generic", "2.2.3", "", nullptr},
    {"OBJECT|ENCODING", "generic", "2.2.3", "key",
     "Returns the internal encoding of a Redis object."},
    {"OBJECT|FREQ", "generic", "4.0.0", "key",
     "Returns the logarithmic access frequency counter of a Redis object."},
    {"OBJECT|IDLETIME", "generic", "2.2.3", "key",
     "Returns the time since the last access to a Redis object."},
    {"OBJECT|REFCOUNT", "generic", "2.2.3", "key",
     "Returns the reference count of a value of a key."},
    {"OBJECT|HELP", "generic", "6.2.0", "",
     "Returns helpful text about the different subcommands."},
    {"EXISTS", "generic", "1.0.0", "key...", nullptr},
    {"DEL", "generic", "1.0.0", "key...", nullptr},
    {"UNLINK", "generic", "4.0.0", "key...", nullptr},
    {"TYPE", "generic", "1.0.0", "key", nullptr},
    {"RENAME", "generic", "1.0.0", "key newkey", nullptr},
    {"KEYS", "generic", "1.0.0", "pattern", nullptr},
    {"SCAN", "generic", "2.8.0", "cursor [MATCH pattern] [COUNT count] [TYPE type]", nullptr},
    {"RANDOMKEY", "generic", "1.0.0", "", nullptr},
    {"RENAMENX", "generic", "1.0.0", "key newkey", nullptr},
    {"MEMORY", "server", "4.0.0", "", nullptr},
    {"MEMORY|USAGE", "server", "4.0.0", "key [SAMPLES count]",
     "Estimates the memory usage of a key."},
    {"MEMORY|STATS", "server", "4.0.0", "", "Returns details about memory usage."},
    {"MEMORY|DOCTOR", "server", "4.0.0", "", "Outputs a memory problems report."},
    {"MEMORY|MALLOC-STATS", "server", "4.0.0", "", "Returns the allocator statistics."},
    {"MEMORY|PURGE", "server", "4.0.0", "", "Asks the allocator to release memory."},
    {"MEMORY|HELP", "server", "4.0.0", "", "Returns helpful text about the subcommands."},
    {"LOLWUT", "server", "5.0.0", "[VERSION version]", nullptr},
    {"SAVE", "server", "1.0.0", "", nullptr},
    {"BGSAVE", "server", "1.0.0", "[SCHEDULE]", nullptr},
    {"BGREWRITEAOF", "server", "1.0.0", "", nullptr},
    {"MODULE", "server", "4.0.0", "", nullptr},
    {"MODULE|LIST", "server", "4.0.0", "", "Returns all loaded modules (none in pion)."},
    {"MODULE|LOAD", "server", "4.0.0", "path [arg...]",
     "Loads a module (refused: pion loads no Redis modules)."},
    {"MODULE|LOADEX", "server", "7.0.0", "path [CONFIG name value...] [ARGS args...]",
     "Loads a module with configuration (refused: pion loads no Redis modules)."},
    {"MODULE|UNLOAD", "server", "4.0.0", "name", "Unloads a module."},
    {"MODULE|HELP", "server", "5.0.0", "", "Returns helpful text about the subcommands."},
    {"EXPIRE", "generic", "1.0.0", "key seconds [NX | XX | GT | LT]", nullptr},
    {"PEXPIRE", "generic", "2.6.0", "key milliseconds [NX | XX | GT | LT]", nullptr},
    {"EXPIREAT", "generic", "1.2.0", "key unix-time-seconds [NX | XX | GT | LT]", nullptr},
    {"PEXPIREAT", "generic", "2.6.0", "key unix-time-milliseconds [NX | XX | GT | LT]", nullptr},
    {"TTL", "generic", "1.0.0", "key", nullptr},
    {"PTTL", "generic", "2.6.0", "key", nullptr},
    {"PERSIST", "generic", "2.2.0", "key", nullptr},
    {"EXPIRETIME", "generic", "7.0.0", "key", nullptr},
    {"PEXPIRETIME", "generic", "7.0.0", "key", nullptr},
    {"MULTI", "transactions", "1.2.0", "", nullptr},
    {"EXEC", "transactions", "1.2.0", "", nullptr},
    {"DISCARD", "transactions", "2.0.0", "", nullptr},
    {"WATCH", "transactions", "2.2.0", "key...", nullptr},
    {"UNWATCH", "transactions", "2.2.0", "", nullptr},
};

bool IsIntegerName(std::string_view n) {
  static const char* kInts[] = {"seconds",
                                "milliseconds",
                                "unix-time-seconds",
                                "unix-time-milliseconds",
                                "count",
                                "cursor",
                                "start",
                                "end",
                                "index",
                                "protover",
                                "client-id",
                                "maxage",
                                "kv_dim",
                                "layer",
                                "n",
                                "ms",
                                "hash_count",
                                "block_size",
                                "num_layers",
                                "id",
                                "sid"};
  for (const char* k : kInts)
    if (n == k) return true;
  return false;
}

// Tokens: words, "[", "]", "(", ")", "|", "...".
std::vector<std::string> Tokenize(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ') {
      ++i;
    } else if (c == '[' || c == ']' || c == '(' || c == ')' || c == '|') {
      out.emplace_back(1, c);
      ++i;
    } else if (s.substr(i, 3) == "...") {
      out.emplace_back("...");
      i += 3;
    } else {
      size_t j = i;
      while (j < s.size() && s[j] != ' ' && s[j] != '[' && s[j] != ']' && s[j] != '(' &&
             s[j] != ')' && s[j] != '|' && s.substr(j, 3) != "...")
        ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<std::string> toks) : t_(std::move(toks)) {}

  // Alternatives separated by '|' until `close` (or the end); each
  // alternative is a sequence. One alternative: that sequence.
  std::vector<DocArg> Items(const char* close) {
    std::vector<std::vector<DocArg>> alts(1);
    while (p_ < t_.size() && t_[p_] != close) {
      const std::string& tok = t_[p_];
      if (tok == "|") {
        ++p_;
        alts.emplace_back();
        continue;
      }
      if (tok == "...") {  // stray: marks the previous item
        ++p_;
        if (!alts.back().empty()) alts.back().back().multiple = true;
        continue;
      }
      if (tok == "]" || tok == ")") {  // unbalanced: stop
        ++p_;
        continue;
      }
      DocArg a = Atom();
      if (p_ < t_.size() && t_[p_] == "...") {
        a.multiple = true;
        ++p_;
      }
      alts.back().push_back(std::move(a));
    }
    if (p_ < t_.size()) ++p_;  // the closing bracket
    if (alts.size() == 1) return std::move(alts[0]);
    DocArg one;
    one.type = "oneof";
    for (auto& alt : alts) {
      if (alt.size() == 1) {
        one.args.push_back(std::move(alt[0]));
      } else {
        DocArg b;
        b.type = "block";
        b.args = std::move(alt);
        b.name = b.args.empty() ? "block" : Lower(b.args[0].name);
        one.args.push_back(std::move(b));
      }
    }
    one.name = NameOf(one);
    return {std::move(one)};
  }

 private:
  static std::string Lower(std::string s) { return ToLower(s); }
  static std::string NameOf(const DocArg& a) {
    std::string n;
    for (const DocArg& c : a.args) {
      if (!n.empty()) n += '-';
      n += Lower(c.name);
      if (n.size() > 40) break;
    }
    return n.empty() ? "arg" : n;
  }

  DocArg Group(const char* close, bool optional) {
    std::vector<DocArg> inner = Items(close);
    DocArg a;
    if (inner.size() == 1) {
      a = std::move(inner[0]);
    } else {
      a.type = "block";
      a.args = std::move(inner);
      a.name = NameOf(a);
    }
    if (optional) a.optional = true;
    return a;
  }

  DocArg Atom() {
    std::string tok = t_[p_++];
    if (tok == "[") return Group("]", true);
    if (tok == "(") return Group(")", false);
    DocArg a;
    bool upper = false, lower = false;
    for (char c : tok) {
      if (c >= 'A' && c <= 'Z') upper = true;
      if (c >= 'a' && c <= 'z') lower = true;
    }
    if (upper && !lower) {
      a.type = "pure-token";
      a.token = tok;
      a.name = Lower(tok);
    } else {
      a.name = tok;
      std::string_view n = tok;
      if (n == "key" || n.ends_with("key"))
        a.type = "key";
      else if (IsIntegerName(n))
        a.type = "integer";
      else
        a.type = "string";
    }
    return a;
  }

  std::vector<std::string> t_;
  size_t p_ = 0;
};

}  // namespace

std::span<const CommandDoc> CommandDocs() {
  static const std::vector<CommandDoc> all = [] {
    std::vector<CommandDoc> v(std::begin(kDocs), std::end(kDocs));
    for (const PionCommandRow& r : PionCommandRows())
      v.push_back({r.name, "pion", r.since, r.syntax, nullptr});
    return v;
  }();
  return all;
}

const CommandDoc* FindCommandDoc(std::string_view name) {
  for (const CommandDoc& d : CommandDocs())
    if (EqualsIgnoreCase(name, d.name)) return &d;
  return nullptr;
}

std::vector<DocArg> ParseDocSyntax(std::string_view syntax) {
  Parser p(Tokenize(syntax));
  return p.Items("");
}

}  // namespace pion::server
