// Server: the process-wide state every worker shares. It owns the config, the
// store (only with --kvcache), the receipt, the client registry and, once the
// durability layer exists, persistence. Passed explicitly to handlers through
// CommandContext::server (no globals).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "server/config.h"
#include "server/receipt.h"
#include "store/store.h"

namespace pion::server {

class Server {
 public:
  explicit Server(Config cfg);
  ~Server();

  const Config& config() const { return cfg_; }
  Config& mutable_config() { return cfg_; }
  // nullptr without --kvcache.
  store::Store* store() { return store_.get(); }
  Receipt& receipt() { return receipt_; }
  bool loading() const { return loading_.load(std::memory_order_acquire); }
  void set_loading(bool v) { loading_.store(v, std::memory_order_release); }
  uint64_t start_time_us() const { return start_time_us_; }

 private:
  Config cfg_;
  std::unique_ptr<store::Store> store_;
  Receipt receipt_;
  std::atomic<bool> loading_{false};
  uint64_t start_time_us_ = 0;
};

}  // namespace pion::server
