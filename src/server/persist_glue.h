// The glue between the server and the durability layer (src/persist): builds
// the Persistence object for --kvcache, hands it to the server
// (Server::SetPersistence: SHUTDOWN SAVE, graceful flush, CONFIG SET
// appendfsync, INFO persistence) with the ack LSN for deferred replies, and runs start-up
// recovery while the server answers -LOADING. Owned by main().
//
// Thread-safety: SetUpPersistence before Server::Start(), RecoverPersistence
// after it, both from the main thread.
#pragma once

#include <functional>
#include <memory>

#include "base/status.h"
#include "persist/persistence.h"
#include "server/server.h"
#include "store/persist_adapter.h"

namespace pion::server {

// nullptr (nothing to persist) without --kvcache. Sets the server's persistence and loading.
// `keep_freed_heap` is handed to recovery (persist::RecoveryOptions).
std::unique_ptr<persist::Persistence> SetUpPersistence(
    Server& server, std::function<void(uint64_t)> keep_freed_heap = nullptr);
// Loads the snapshot and replays the WAL, runs `before_serving` (if any: still
// loading, so no command runs), then clears loading. An error means the server
// must not serve (corruption names the file and offset).
Status RecoverPersistence(Server& server, persist::Persistence* p,
                          const std::function<void()>& before_serving = nullptr);

persist::SyncPolicy ToSyncPolicy(FsyncPolicy p);

}  // namespace pion::server
