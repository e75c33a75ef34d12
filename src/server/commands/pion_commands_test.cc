// pion's command rows (kvproto/pion_commands.h) against what the server
// registers and what the module's registration says.
#include "kvproto/pion_commands.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "server/commands/command_docs.h"
#include "server/commands/command_table.h"

namespace pion::server {
namespace {

bool PionFamily(std::string_view n) {
  return n.starts_with("KV.") || n.starts_with("V.") || n.starts_with("PION.") ||
         n.starts_with("ATTEND.");
}

TEST(PionCommands, TheServerServesEveryRowAndNoOtherPionCommand) {
  std::map<std::string, CommandSpec> server;
  for (const CommandSpec& s : AllCommands())
    if (PionFamily(s.name)) server.emplace(s.name, s);
  size_t rows = 0;
  for (const PionCommandRow& r : PionCommandRows()) {
    if (r.module == ModuleForm::kOnly) {
      EXPECT_EQ(server.count(r.name), 0u) << r.name;
      continue;
    }
    ++rows;
    auto it = server.find(r.name);
    ASSERT_NE(it, server.end()) << r.name;
    const CommandSpec& s = it->second;
    // (Its other fields are the row's, copied by AddPionCommands.)
    EXPECT_STREQ(s.name, r.name);
    EXPECT_NE(s.handler, nullptr) << r.name;
    // COMMAND DOCS reads the spec: group "pion", the row's version and grammar.
    EXPECT_STREQ(s.group, "pion") << r.name;
    EXPECT_STREQ(s.since, r.since) << r.name;
    EXPECT_STREQ(s.syntax, r.syntax) << r.name;
    EXPECT_TRUE(s.subcommands.empty()) << r.name;
  }
  // ... and no pion command outside the rows.
  EXPECT_EQ(server.size(), rows);
}

TEST(PionCommands, RowsAreUniqueUpperCaseAndDocumented) {
  std::set<std::string> seen;
  for (const PionCommandRow& r : PionCommandRows()) {
    EXPECT_TRUE(seen.insert(r.name).second) << r.name;
    for (const char* c = r.name; *c != 0; ++c) EXPECT_FALSE(*c >= 'a' && *c <= 'z') << r.name;
    EXPECT_EQ(FindPionCommandRow(r.name), &r);
    ASSERT_NE(r.since, nullptr) << r.name;
    ASSERT_NE(r.syntax, nullptr) << r.name;
    // A grammar parses into arguments.
    if (r.syntax[0] != 0) {
      EXPECT_FALSE(ParseDocSyntax(r.syntax).empty()) << r.name;
    }
  }
  EXPECT_EQ(FindPionCommandRow("KV.PREFIX.NOPE"), nullptr);
}

TEST(PionCommands, ModuleFlagsAndKeys) {
  // What the module registers (Redis's flag words).
  const std::map<std::string, std::string> want = {
      {"KV.PREFIX.REGISTER", "write deny-oom"},
      {"KV.PREFIX.LOOKUP", "readonly fast"},
      {"KV.PREFIX.DROP", "write"},
      {"KV.PREFIX.BLOCKS", "readonly fast"},
      {"KV.PREFIX.MEMBERSHIP", "readonly fast"},
      {"KV.PREFIX.INFO", "readonly fast"},
      {"V.STOREBATCH", "write deny-oom"},
      {"V.FETCH", "readonly"},
      {"V.INFO", "readonly fast"},
      {"PION.STATS", "readonly fast"},
      {"PION.LOADROWS", "write deny-oom"},
      {"KV.BLOCK.MATCH", "readonly fast getkeys-api"},
  };
  std::map<std::string, std::string> got;
  for (const PionCommandRow& r : PionCommandRows())
    if (r.module != ModuleForm::kAbsent) got[r.name] = ModuleCommandFlags(r);
  EXPECT_EQ(got, want);
  EXPECT_EQ(FindPionCommandRow("KV.PREFIX.INFO")->module, ModuleForm::kNoKeys);
}

}  // namespace
}  // namespace pion::server
