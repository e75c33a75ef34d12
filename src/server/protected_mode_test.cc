#include "server/protected_mode.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

namespace pion::server {
namespace {

sockaddr_storage V4(const char* ip) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  a->sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, ip, &a->sin_addr), 1);
  return ss;
}

sockaddr_storage V6(const char* ip) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
  a->sin6_family = AF_INET6;
  EXPECT_EQ(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
  return ss;
}

TEST(ProtectedMode, LoopbackPeers) {
  EXPECT_TRUE(IsLoopbackPeer(V4("127.0.0.1")));
  EXPECT_TRUE(IsLoopbackPeer(V4("127.255.3.4")));
  EXPECT_TRUE(IsLoopbackPeer(V6("::1")));
  EXPECT_TRUE(IsLoopbackPeer(V6("::ffff:127.0.0.2")));
  EXPECT_FALSE(IsLoopbackPeer(V4("10.0.0.1")));
  EXPECT_FALSE(IsLoopbackPeer(V4("128.0.0.1")));
  EXPECT_FALSE(IsLoopbackPeer(V4("0.0.0.0")));
  EXPECT_FALSE(IsLoopbackPeer(V6("::ffff:10.1.2.3")));
  EXPECT_FALSE(IsLoopbackPeer(V6("fe80::1")));
  sockaddr_storage unix_peer{};
  unix_peer.ss_family = AF_UNIX;
  EXPECT_FALSE(IsLoopbackPeer(unix_peer));
}

TEST(ProtectedMode, LoopbackBinds) {
  EXPECT_TRUE(IsLoopbackBind("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackBind("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackBind("::1"));
  EXPECT_TRUE(IsLoopbackBind("localhost"));
  EXPECT_FALSE(IsLoopbackBind("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackBind("::"));
  EXPECT_FALSE(IsLoopbackBind("192.168.1.5"));
}

TEST(ProtectedMode, DeniedReplyIsOneRespErrorLine) {
  ASSERT_GT(kDeniedReply.size(), 8u);
  EXPECT_EQ(kDeniedReply.substr(0, 8), "-DENIED ");
  EXPECT_EQ(kDeniedReply.substr(kDeniedReply.size() - 2), "\r\n");
  EXPECT_EQ(kDeniedReply.find('\r'), kDeniedReply.size() - 2);
  EXPECT_EQ(kDeniedReply.find('\n'), kDeniedReply.size() - 1);
}

}  // namespace
}  // namespace pion::server
