// CommandTable::Find: case-insensitive names, confirmed word by word against
// the zero-padded upper-case name.
#include "server/commands/command_table.h"

#include <gtest/gtest.h>

#include <string>

namespace pion::server {
namespace {

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

TEST(CommandTable, FindsEveryNameInAnyCaseAndNothingElse) {
  const CommandTable table(AllCommands());
  ASSERT_GT(table.specs().size(), 100u);
  for (const CommandSpec& s : table.specs()) {
    const std::string name = s.name;
    EXPECT_EQ(table.Find(name), &s) << name;
    EXPECT_EQ(table.Find(Lower(name)), &s) << name;
    std::string mixed = Lower(name);
    for (size_t i = 0; i < mixed.size(); i += 2) mixed[i] = name[i];
    EXPECT_EQ(table.Find(mixed), &s) << mixed;
    // A name one byte longer or shorter, or with any one byte changed, is
    // another command or none (the bytes past the name are padding).
    for (const std::string& other :
         {name + "X", name + std::string(1, '\0'), name.substr(0, name.size() - 1)}) {
      const CommandSpec* f = table.Find(other);
      EXPECT_TRUE(f == nullptr || f->name == other) << name;
    }
    for (size_t i = 0; i < name.size(); ++i) {
      std::string changed = name;
      changed[i] = '\x7f';
      EXPECT_EQ(table.Find(changed), nullptr) << name << " at " << i;
    }
  }
  EXPECT_EQ(table.Find(""), nullptr);
  EXPECT_EQ(table.Find("NOSUCHCOMMAND"), nullptr);
  EXPECT_EQ(table.Find(std::string(CommandTable::kMaxName + 1, 'A')), nullptr);
  EXPECT_EQ(table.Find(std::string(CommandTable::kMaxName, 'A')), nullptr);
  // Exact-word lengths (8 and 16 bytes) and their neighbours.
  EXPECT_NE(table.Find("kv.prefix.lookup"), nullptr);
  EXPECT_EQ(table.Find("kv.prefix.lookuq"), nullptr);
  EXPECT_NE(table.Find("GETRANGE"), nullptr);
  EXPECT_EQ(table.Find("GETRANGF"), nullptr);
}

}  // namespace
}  // namespace pion::server
