// DeferredReply: see deferred_reply.h.
#include "net/deferred_reply.h"

#include <utility>

#include "net/resp_errors.h"
#include "net/service.h"

namespace pion::net {

DeferredReply::~DeferredReply() {
  if (!completed()) Complete([](ReplyBuilder& r) { r.Error(kErrDeferredAbandoned); });
}

void DeferredReply::Complete(WriteFn fn) {
  if (done_.exchange(true, std::memory_order_acq_rel)) return;
  host_->CompleteDeferred(client_id_, slot_, std::move(fn));
}

void DeferredReply::SimpleString(std::string s) {
  Complete([s = std::move(s)](ReplyBuilder& r) { r.SimpleString(s); });
}

void DeferredReply::Error(std::string line) {
  Complete([line = std::move(line)](ReplyBuilder& r) { r.Error(line); });
}

}  // namespace pion::net
