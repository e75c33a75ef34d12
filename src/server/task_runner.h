// TaskRunner: the Server's background threads for work a worker must not block
// on (KV.PREFIX.SAVE's snapshot write, COMMIT's fsync). It is the shared
// base::ThreadPool (base/thread_pool.h): FIFO tasks on a fixed number of
// threads, started by Server::Start, drained and joined by Stop. A handler that
// posts a task usually holds a DeferredReply (net/deferred_reply.h) and
// completes it from the task.
#pragma once

#include "base/thread_pool.h"

namespace pion::server {

using TaskRunner = base::ThreadPool;

}  // namespace pion::server
