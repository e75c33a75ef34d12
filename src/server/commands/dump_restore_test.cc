// DUMP and RESTORE in process: byte-for-byte the payloads Redis 7.0 writes
// for the same values (so the RDB encodings and the CRC-64 are Redis's), a
// Redis LZF-compressed payload restored, RESTORE's options and texts.
#include <string>

#include "server/commands/rdb_payload.h"
#include "server/commands/testing/command_fixture.h"

namespace pion::server::testing {
namespace {

std::string Unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

TEST(Crc64Jones, CheckValue) { EXPECT_EQ(Crc64Jones(0, "123456789", 9), 0xe9c6d914c4b8d9caull); }

class DumpRestoreCommand : public KvTest {};

TEST_F(DumpRestoreCommand, DumpMatchesRedis) {
  // Payloads from redis-server 7.0 (DUMP of the same values).
  const std::pair<const char*, const char*> kCases[] = {
      {"hello", "000568656c6c6f0a006372df766534200a"},
      {"12", "00c00c0a003c2af8515c04bcd5"},
      {"300000", "00c2e09304000a00f05efab086412fc9"},
      {"-1000", "00c118fc0a004602355e70225a90"},
      {"", "00000a005d9b5c400f7fa2da"},
  };
  for (const auto& [value, hex] : kCases) {
    Run({"SET", "k", value});
    EXPECT_EQ(Run({"DUMP", "k"}), Unhex(hex)) << value;
  }
  EXPECT_EQ(Run({"DUMP", "missing"}).type, RespValue::Type::kNull);
}

TEST_F(DumpRestoreCommand, RestoreRedisPayloads) {
  // Redis compresses a 100-byte run of 'a' with LZF.
  EXPECT_EQ(Run({"RESTORE", "l", "0", Unhex("00c3094064016161e057000161610a00e8a3b507b06df271")}),
            "OK");
  EXPECT_EQ(Run({"GET", "l"}), std::string(100, 'a'));
  EXPECT_EQ(Run({"RESTORE", "n", "0", Unhex("00c118fc0a004602355e70225a90")}), "OK");
  EXPECT_EQ(Run({"GET", "n"}), "-1000");
}

TEST_F(DumpRestoreCommand, RoundTripAndOptions) {
  std::string big(100000, 'z');
  Run({"SET", "src", big});
  std::string payload = Run({"DUMP", "src"}).str;
  EXPECT_EQ(Run({"RESTORE", "dst", "0", payload}), "OK");
  EXPECT_EQ(Run({"GET", "dst"}), big);
  EXPECT_EQ(Run({"RESTORE", "dst", "0", payload}).error(),
            "BUSYKEY Target key name already exists.");
  EXPECT_EQ(Run({"RESTORE", "dst", "5000", payload, "REPLACE"}), "OK");
  EXPECT_GT(Run({"PTTL", "dst"}).integer, 0);
  EXPECT_EQ(Run({"RESTORE", "abs", "2000000000000", payload, "ABSTTL"}), "OK");
  EXPECT_TRUE(Run({"PEXPIRETIME", "abs"}).is_integer(2000000000000));
  // A time in the past with ABSTTL: the key is only removed.
  EXPECT_EQ(Run({"RESTORE", "abs", "1", payload, "ABSTTL", "REPLACE"}), "OK");
  EXPECT_TRUE(Run({"EXISTS", "abs"}).is_integer(0));
  EXPECT_EQ(Run({"RESTORE", "idle", "0", payload, "IDLETIME", "1000"}), "OK");
  EXPECT_GE(Run({"OBJECT", "IDLETIME", "idle"}).integer, 1000);
  EXPECT_EQ(Run({"RESTORE", "x", "-1", payload}).error(), "ERR Invalid TTL value, must be >= 0");
  EXPECT_EQ(Run({"RESTORE", "x", "0", payload, "IDLETIME", "-1"}).error(),
            "ERR Invalid IDLETIME value, must be >= 0");
  EXPECT_EQ(Run({"RESTORE", "x", "0", payload, "FREQ", "256"}).error(),
            "ERR Invalid FREQ value, must be >= 0 and <= 255");
  EXPECT_EQ(Run({"RESTORE", "x", "0", payload, "FREQ", "1", "IDLETIME", "1"}).error(),
            "ERR syntax error");
  std::string bad = payload;
  bad[3] ^= 1;
  EXPECT_EQ(Run({"RESTORE", "x", "0", bad}).error(),
            "ERR DUMP payload version or checksum are wrong");
  EXPECT_EQ(Run({"RESTORE", "x", "0", "short"}).error(),
            "ERR DUMP payload version or checksum are wrong");
  EXPECT_TRUE(Run({"EXISTS", "x"}).is_integer(0));
}

}  // namespace
}  // namespace pion::server::testing
