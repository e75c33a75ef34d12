// ClientControl: what a command handler may do to the client connection its
// request came on: read and switch the protocol version and the
// authentication state, close after the reply, stop reading (SHUTDOWN),
// reserve client memory for a large reply, take a deferred reply's ticket, and
// turn replies off (CLIENT REPLY), take a big argument's buffer, check the
// output limit while a long reply grows.
// Connection implements it; the in-process command tests implement it without
// a socket (src/server/commands/testing/command_fixture.h).
//
// Thread-safety: the owning host's thread only (handlers run there).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "base/owned_buffer.h"
#include "net/deferred_reply.h"

namespace pion::net {

class ReplyBuilder;

// CLIENT REPLY: kOff drops every reply from this command on (this one
// included), kSkip drops this command's reply and the next command's, kOn
// sends replies again from this one on.
enum class ReplyMode { kOn, kOff, kSkip };

class ClientControl {
 public:
  virtual int proto() const = 0;  // 2 or 3
  // Switches the protocol of this reply and every later one.
  virtual void SetProto(int p) = 0;
  virtual bool authenticated() const = 0;
  virtual void SetAuthenticated(bool v) = 0;
  // Closes the connection once this reply is sent.
  virtual void CloseAfterReply() = 0;
  // Shutdown: stop reading; close once everything queued is sent.
  virtual void StopReading() = 0;
  // Reserves `n` bytes of client memory for a reply the handler is about to
  // build; false when maxmemory-clients does not allow them.
  virtual bool ReserveMemory(size_t n) = 0;
  // Reserves the reply's place and returns its ticket (the server's ctx.Defer()).
  virtual std::shared_ptr<DeferredReply> BeginDeferred() = 0;
  // CLIENT REPLY ON|OFF|SKIP (see ReplyMode).
  virtual void SetReplyMode(ReplyMode m) = 0;
  // Gives the handler the buffer a big argument of the current request was
  // read into (RequestParser::TakeBigArg), so it can keep the bytes without
  // copying them; empty when `arg` is not such an argument. `arg` (and every
  // other view into that buffer) stays valid while the buffer is kept.
  // Where a Pub/Sub confirmation goes while CLIENT REPLY OFF|SKIP drops this
  // command's reply (Redis sends those pushes regardless); nullptr: the
  // command's own reply builder.
  virtual ReplyBuilder* PushWriter() { return nullptr; }
  // For a handler building a long reply piece by piece (KEYS): true once what
  // the client holds, this reply so far included, is past its hard output
  // limit (Redis checks the limit as a reply grows). The handler stops adding
  // to the reply then; the connection is closed after the command and nothing
  // of the reply is sent.
  virtual bool ReplyOverOutputLimit() { return false; }
  virtual OwnedBuffer TakeArgBuffer(std::string_view arg) {
    (void)arg;
    return OwnedBuffer();
  }

 protected:
  ~ClientControl() = default;
};

}  // namespace pion::net
