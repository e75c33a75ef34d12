// The error table's reasons (errors.cc): each store, attend and quant reason is
// worded from its code and fields alone, never from the Status message (a log
// line), and every reason value has its own row.
#include <gtest/gtest.h>

#include <string>

#include "attend/reason.h"
#include "kvproto/errors.h"
#include "quant/format.h"
#include "quant/reason.h"
#include "store/reason.h"

namespace pion::server {
namespace {

// A log message that must never show in a reply.
constexpr std::string_view kLog = "LOG-ONLY text";

template <typename E>
std::string Reply(Code c, E r, ReasonFields f = {}) {
  return StatusToError(Status(c, r, f, kLog));
}

TEST(ErrorReasons, StoreTextsAreTheClientTexts) {
  using store::Reason;
  EXPECT_EQ(Reply(Code::kNotFound, Reason::kSessionNotFound), "NOSESSION session not found");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kSizeMismatch, {12, 2, 64, 4}),
            "ERR V.STOREBATCH: blob size 12 != expected 512 (count=2 x kv_dim=64 x 4)");
  EXPECT_EQ(Reply(Code::kNotFound, Reason::kNothingStored),
            "ERR V.FETCH BATCH: session has no stored layers");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kRegisteredOther,
                  {64, static_cast<int>(quant::Format::kFp16)}),
            "ERR namespace already registered with kv_dim 64 vquant fp16");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kParentNotFound),
            "ERR PARENT namespace is not registered");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kParentDim, {64}),
            "ERR PARENT namespace has kv_dim 64 (a chain keeps one kv_dim)");
  EXPECT_EQ(StatusToError(
                Status(Code::kInvalidArgument, Reason::kParentMismatch, {}, kLog).WithName("t1")),
            "ERR namespace already registered with PARENT 't1'");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kParentMismatch),
            "ERR namespace already registered without a PARENT");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kChainTooLong, {4}),
            "ERR PARENT chain too long (at most 4 namespaces: max-chain-length)");
  EXPECT_EQ(Reply(Code::kOutOfBudget, Reason::kNoMemory), "OOM out of memory");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kBlockQuantized), kErrBlockQuantized);
  // One reason, two codes, two texts: the table keys on both.
  EXPECT_EQ(Reply(Code::kIOError, Reason::kTierStopped), "ERR tier stopped");
  EXPECT_EQ(Reply(Code::kBusy, Reason::kTierStopped), "ERR disk tier stopped");
  EXPECT_EQ(Reply(Code::kBusy, Reason::kTierChanged),
            "ERR value changed on the disk tier while it was read, try again");
}

TEST(ErrorReasons, AttendStoreFramesTheSlotReason) {
  using attend::Reason;
  using attend::Tensor;
  EXPECT_EQ(AttendStoreError(Status(Code::kInvalidArgument, Reason::kNonFinite,
                                    {static_cast<int>(Tensor::kV), 2, 37}, kLog)),
            "ERR ATTEND.PREFIX.STORE failed (non-finite value in V head 2 token 37)");
  EXPECT_EQ(AttendStoreError(Status(Code::kInvalidArgument, Reason::kF16Range,
                                    {static_cast<int>(Tensor::kK), 3, 7}, kLog)),
            "ERR ATTEND.PREFIX.STORE failed (value beyond the f16 range in K head 3 token 7)");
  EXPECT_EQ(AttendStoreError(Status(Code::kOutOfBudget, Reason::kSlotTooBig, {4096, 1024}, kLog)),
            "OOM ATTEND.PREFIX.STORE: slot of 4096 bytes exceeds attend-maxmemory (1024)");
  EXPECT_EQ(AttendStoreError(Status(Code::kOutOfBudget, Reason::kNoSlots, {}, kLog)),
            "OOM ATTEND.PREFIX.STORE: attend-max-slots is 0");
  EXPECT_EQ(Reply(Code::kInvalidArgument, Reason::kRowCountDiffer, {3, 4}),
            "ERR K has 3 rows, V has 4");
}

TEST(ErrorReasons, QuantNonFiniteNamesTheRow) {
  const Status st(Code::kInvalidArgument, quant::Reason::kNonFinite, {1}, kLog);
  EXPECT_EQ(StatusToError(st), "ERR non-finite value in row 1");
  EXPECT_EQ(ChainNonFiniteError(3, st),
            "ERR value 3: non-finite value in row 1 (only FORMAT fp16 stores inf and NaN)");
}

// Every value of each enum, up to its last, has a row of its own: none falls back
// to the message-only form (which would show the log text).
template <typename E>
void EveryValueWorded(E last) {
  for (uint32_t v = 1; v <= static_cast<uint32_t>(last); ++v) {
    for (Code c : {Code::kInvalidArgument, Code::kNotFound, Code::kOutOfBudget}) {
      const std::string line = StatusToError(Status(c, static_cast<E>(v), {}, kLog));
      EXPECT_EQ(line.find(kLog), std::string::npos) << ReasonDomain(E{}) << " " << v;
      EXPECT_FALSE(line.empty()) << ReasonDomain(E{}) << " " << v;
    }
  }
}

TEST(ErrorReasons, EveryReasonHasItsOwnText) {
  EveryValueWorded(store::Reason::kReplayNamespaceAbsent);
  EveryValueWorded(attend::Reason::kNotSparseAuto);
  EveryValueWorded(quant::Reason::kNonFinite);
}

TEST(ErrorReasons, WithoutAReasonTheMessageIsTheText) {
  EXPECT_EQ(StatusToError(Status::InvalidArgument("bad thing")), "ERR bad thing");
  EXPECT_EQ(StatusToError(Status::OutOfBudget("")), kErrOom);
  EXPECT_EQ(StatusToError(Status::WrongType()), kErrWrongType);
}

TEST(ErrorReasons, ReasonsOfOtherDomainsDoNotMix) {
  const Status st(Code::kNotFound, store::Reason::kSessionNotFound, {}, kLog);
  EXPECT_EQ(st.reason<store::Reason>(), store::Reason::kSessionNotFound);
  EXPECT_EQ(st.reason<attend::Reason>(), attend::Reason::kNone);
  EXPECT_EQ(st.reason<quant::Reason>(), quant::Reason::kNone);
  EXPECT_TRUE(st.has_reason());
  EXPECT_FALSE(Status::NotFound("x").has_reason());
  // Copies keep the reason, its fields and its name.
  Status a = Status(Code::kInvalidArgument, store::Reason::kParentDim, {64}, kLog).WithName("p");
  Status b = a;
  EXPECT_EQ(b.reason<store::Reason>(), store::Reason::kParentDim);
  EXPECT_EQ(b.field(0), 64);
  EXPECT_EQ(b.name(), "p");
  EXPECT_EQ(b.message(), kLog);
}

}  // namespace
}  // namespace pion::server
