// MULTI / EXEC / DISCARD / WATCH / UNWATCH (docs/protocol.md "Transactions").
// A client's transaction state lives in its ClientInfo::service_data (created
// on first use, freed by CommandService::OnClose). While a client is in MULTI,
// CommandService::Dispatch admits each command as usual (an error there marks
// the transaction, so EXEC answers EXECABORT), queues it and answers +QUEUED;
// the commands flagged kCmdTxControl run at once. Under memory pressure (the
// store has no room for one more entry, Store::OutOfMemory) Dispatch refuses,
// as Redis, every command queued (-OOM, marking the transaction) and EXEC of a
// transaction holding a kCmdDenyOom command (EXECABORT, nothing runs). EXEC runs the queue holding
// the server's exec lock exclusively; every other command holds it shared,
// so no other client's command interleaves with a transaction.
//
// Thread-safety: a client's state is touched only by its worker thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/commands/command.h"

namespace pion::server {

struct TxState {
  bool in_multi = false;
  bool dirty = false;    // a command was refused while queueing
  bool denyoom = false;  // a queued command may use memory (kCmdDenyOom)
  struct Queued {
    const CommandSpec* spec;
    std::vector<std::string> args;
  };
  std::vector<Queued> queued;
  std::vector<std::pair<std::string, uint64_t>> watched;  // key, store version at WATCH
  uint64_t queued_mem = 0;  // memory the queued commands hold (CLIENT LIST multi-mem)
  ClientInfo* owner = nullptr;

  // Publishes the queue's length and memory to the owner's ClientInfo
  // (CLIENT LIST multi= and multi-mem; the memory counts toward
  // maxmemory-clients through tot-mem).
  void Publish();
  void Reset() {
    in_multi = false;
    dirty = false;
    denyoom = false;
    queued.clear();
    watched.clear();
    queued_mem = 0;
    Publish();
  }
};

// The client's state, or nullptr when it never used a transaction command.
TxState* TxOf(ClientInfo* c);
// Created on first use.
TxState& TxFor(ClientInfo* c);
// OnClose / RESET.
void TxFree(ClientInfo* c);
void TxClear(ClientInfo* c);

// Called by Dispatch for a client in MULTI with an admitted command that is not
// kCmdTxControl: queues it (or refuses a kCmdNoMulti one) and replies.
void TxQueue(CommandContext& ctx, const CommandSpec* spec, TxState& tx);

// Whether `spec` is EXEC (Dispatch refuses it under memory pressure when the
// transaction holds a kCmdDenyOom command, as Redis).
bool IsExec(const CommandSpec* spec);

void AddTransactionCommands(std::vector<CommandSpec>* out);

}  // namespace pion::server
