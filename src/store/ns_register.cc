// Registering a namespace: the checks of KV.PREFIX.REGISTER, the namespace it
// creates and what a re-registration changes. OpRegister
// (store/prefix_register.cc) runs them under its locks, with the parent, the
// budget and the log around them;
// RegisterUnshared is the same registration of a namespace no store holds.
#include <cstdio>
#include <string>
#include <utility>

#include "base/check.h"
#include "store/namespace.h"

namespace pion::store {

void AssertRegisterArgs([[maybe_unused]] const RegisterArgs& a) {
  PION_DCHECK(!a.ns.empty() && a.ns.size() <= kMaxNamespaceBytes);
  PION_DCHECK(a.kv_dim >= 1 && a.kv_dim <= quant::kMaxDim);
  PION_DCHECK(quant::DimSupported(a.fmt, a.kv_dim));
}

Status CheckReregister(const Namespace& n, const RegisterArgs& a) {
  if (n.dim != a.kv_dim || n.fmt != a.fmt) {
    char buf[128];
    std::string_view q = quant::FormatName(n.fmt);
    std::snprintf(buf, sizeof(buf), "namespace already registered with kv_dim %u vquant %.*s",
                  n.dim, static_cast<int>(q.size()), q.data());
    return Status(Code::kInvalidArgument, Reason::kRegisteredOther,
                  {n.dim, static_cast<int>(n.fmt)}, buf);
  }
  // The link is fixed at creation: PARENT, when given, must repeat it.
  if (!a.parent.empty() && (!n.parent || n.parent->name != a.parent))
    return Status(Code::kInvalidArgument, Reason::kParentMismatch, {}, "parent mismatch")
        .WithName(n.parent ? n.parent->name : "");
  return Status::OK();
}

std::shared_ptr<const BlockTable> RegisteredTable(const RegisterArgs& a) {
  std::shared_ptr<const BlockTable> table = a.blocks;
  if (table && !table->finished()) table = BlockTable::Finished(*table);
  return table;
}

std::shared_ptr<Namespace> NewNamespace(const RegisterArgs& a, uint64_t incarnation,
                                        std::shared_ptr<Namespace> parent,
                                        std::shared_ptr<const BlockTable> table) {
  auto n = std::make_shared<Namespace>(std::string(a.ns), incarnation, a.kv_dim, a.fmt,
                                       std::move(parent));
  n->blocks = std::move(table);
  n->prefill_us = a.has_prefill ? a.prefill_us : 0;
  return n;
}

void SetRegistration(Namespace& n, std::shared_ptr<const BlockTable> table, const RegisterArgs& a) {
  if (table) n.blocks = std::move(table);
  n.prefill_us = a.has_prefill ? a.prefill_us : 0;
}

Status RegisterUnshared(const RegisterArgs& a, std::shared_ptr<Namespace>* n) {
  AssertRegisterArgs(a);
  std::shared_ptr<const BlockTable> table = RegisteredTable(a);
  if (*n != nullptr) {
    PION_RETURN_IF_ERROR(CheckReregister(**n, a));
    SetRegistration(**n, std::move(table), a);
    return Status::OK();
  }
  // OpRegister's answer for a parent it does not hold.
  if (!a.parent.empty())
    return Status(Code::kInvalidArgument, Reason::kParentNotFound, {}, "parent not registered");
  *n = NewNamespace(a, 1, nullptr, std::move(table));
  return Status::OK();
}

}  // namespace pion::store
