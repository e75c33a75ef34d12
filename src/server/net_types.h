// The network layer's types under their server names: the command layer and
// the process use them unqualified (they are defined in src/net, namespace
// pion::net, which knows nothing of the server).
#pragma once

#include "net/buffer.h"
#include "net/client_control.h"
#include "net/client_info.h"
#include "net/connection.h"
#include "net/deferred_reply.h"
#include "net/event_loop.h"
#include "net/output_queue.h"
#include "net/pinned_block.h"
#include "net/reply.h"
#include "net/resp_parser.h"
#include "net/resp_writer.h"
#include "net/service.h"

namespace pion::server {

using net::BufferGate;
using net::BufferPool;
using net::ClientControl;
using net::ClientInfo;
using net::Connection;
using net::DeferredReply;
using net::EventLoop;
using net::FormatDouble;
using net::IoBuf;
using net::kBigArgBytes;
using net::OutputQueue;
using net::ParserLimits;
using net::PinnedBlock;
using net::ReplyBuilder;
using net::RespParser;
using net::RespWriter;
using net::SplitInlineArgs;

}  // namespace pion::server
