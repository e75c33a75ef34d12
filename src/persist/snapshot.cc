// Snapshot writer and loader: see snapshot.h and docs/snapshot_format.md.
#include "persist/snapshot.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"

namespace pion::persist {
namespace {

// Sequential checked writes through a 1 MiB buffer; large pieces bypass it.
class SeqWriter {
 public:
  explicit SeqWriter(WritableFile* f) : f_(f) { buf_.reserve(kBuf); }
  Status Write(std::span<const uint8_t> d) {
    if (buf_.size() + d.size() <= kBuf) {
      buf_.insert(buf_.end(), d.begin(), d.end());
      return Status::OK();
    }
    PION_RETURN_IF_ERROR(Flush());
    if (d.size() >= kBuf) {
      PION_RETURN_IF_ERROR(f_->WriteAt(off_, d));
      off_ += d.size();
      return Status::OK();
    }
    buf_.insert(buf_.end(), d.begin(), d.end());
    return Status::OK();
  }
  Status Flush() {
    if (buf_.empty()) return Status::OK();
    PION_RETURN_IF_ERROR(f_->WriteAt(off_, buf_));
    off_ += buf_.size();
    buf_.clear();
    return Status::OK();
  }
  uint64_t offset() const { return off_ + buf_.size(); }

 private:
  static constexpr size_t kBuf = 1 << 20;
  WritableFile* f_;
  std::vector<uint8_t> buf_;
  uint64_t off_ = 0;
};

class SnapWriter {
 public:
  SnapWriter(WritableFile* f, uint64_t generation) : w_(f), gen_(generation) {}
  Status Section(RecordType t, std::span<const uint8_t> prefix,
                 std::span<const std::span<const uint8_t>> rows) {
    uint64_t len = prefix.size();
    for (auto r : rows) len += r.size();
    PION_CHECK(len <= kMaxPayload);
    uint8_t hdr[kRecordHeaderSize];
    EncodeRecordHeader(hdr, t, ++seq_, static_cast<uint32_t>(len));
    std::vector<std::span<const uint8_t>> pieces;
    pieces.reserve(rows.size() + 1);
    pieces.push_back(prefix);
    pieces.insert(pieces.end(), rows.begin(), rows.end());
    PutU32(hdr, RecordCrc(gen_, hdr, pieces));
    PION_RETURN_IF_ERROR(w_.Write(hdr));
    for (auto p : pieces) PION_RETURN_IF_ERROR(w_.Write(p));
    return Status::OK();
  }
  // Before a section of type `t` with a `prefix_len`-byte prefix: a PAD section
  // if needed so that the rows after the prefix start at a multiple of
  // kSnapRowsAlign in the file (version 4, docs/snapshot_format.md §2).
  Status AlignRows(size_t prefix_len) {
    const uint64_t rows_at = w_.offset() + kRecordHeaderSize + prefix_len;
    const uint64_t need = (kSnapRowsAlign - rows_at % kSnapRowsAlign) % kSnapRowsAlign;
    if (need == 0) return Status::OK();
    // A PAD section is its 20-byte header plus 0..63 zero bytes.
    const uint64_t pad = (need + kSnapRowsAlign - kRecordHeaderSize) % kSnapRowsAlign;
    static const uint8_t kZeros[kSnapRowsAlign] = {};
    ++pads_;
    return Section(RecordType::kSnapPad, std::span<const uint8_t>(kZeros, pad), {});
  }
  SeqWriter& out() { return w_; }
  uint64_t sections() const { return seq_; }
  uint64_t pads() const { return pads_; }

 private:
  SeqWriter w_;
  uint64_t gen_;
  uint64_t seq_ = 0;
  uint64_t pads_ = 0;
};

// `tier_refs`: segments in the disk tier are left out (the namespace's
// NAMESPACE_TIER section names them) instead of copied.
Status WriteLayer(SnapWriter& sw, const SnapshotNamespace& v, Side side,
                  const SnapshotNamespace::Layer& lv, size_t row_bytes, bool tier_refs,
                  SnapshotStats* st) {
  static const std::vector<uint8_t> kZeroRow(quant::RowBytes(quant::Format::kFp16, quant::kMaxDim) *
                                             2);
  PION_CHECK(row_bytes <= kZeroRow.size());
  std::vector<std::span<const uint8_t>> run;
  uint64_t run_start = 0, run_rows = 0, run_bytes = 0;
  auto flush = [&]() -> Status {
    if (run_rows == 0) return Status::OK();
    StoreRec r;
    r.ns = v.ns;
    r.incarnation = v.incarnation;
    r.side = side;
    r.layer = lv.layer;
    r.start = run_start;
    r.count = run_rows;
    r.row_bytes = static_cast<uint32_t>(row_bytes);
    std::vector<uint8_t> prefix;
    EncodeStorePrefix(r, &prefix);
    PION_RETURN_IF_ERROR(sw.AlignRows(prefix.size()));
    PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapRows, prefix, run));
    st->rows += run_rows;
    st->row_bytes += run_bytes;
    run.clear();
    run_rows = run_bytes = 0;
    return Status::OK();
  };
  uint64_t row = 0;
  for (const auto& seg : lv.segments) {
    if (seg.data == nullptr || (tier_refs && seg.in_tier)) {
      PION_RETURN_IF_ERROR(flush());
      row += seg.rows;
      continue;
    }
    // A segment (a chunk) that fits a section of its own is never split across
    // two, so that a mapped load can keep it by reference.
    if (run_rows > 0 && run_bytes + seg.rows * row_bytes > kSnapMaxRowsSection &&
        seg.rows * row_bytes <= kSnapMaxRowsSection)
      PION_RETURN_IF_ERROR(flush());
    uint64_t done = 0;
    while (done < seg.rows) {
      if (run_rows == 0) run_start = row + done;
      uint64_t room = (kSnapMaxRowsSection - run_bytes) / row_bytes;
      if (room == 0) {
        PION_RETURN_IF_ERROR(flush());
        continue;
      }
      uint64_t take = std::min<uint64_t>(room, seg.rows - done);
      run.emplace_back(seg.data + done * row_bytes, take * row_bytes);
      run_rows += take;
      run_bytes += take * row_bytes;
      done += take;
    }
    row += seg.rows;
  }
  PION_RETURN_IF_ERROR(flush());
  // Keep the layer's row count: its last row is always present.
  if (!lv.segments.empty() && lv.segments.back().data == nullptr && lv.rows > 0) {
    run_start = lv.rows - 1;
    run.emplace_back(kZeroRow.data(), row_bytes);
    run_rows = 1;
    run_bytes = row_bytes;
    PION_RETURN_IF_ERROR(flush());
  }
  return Status::OK();
}

// The chunks of `v` in the disk tier as one NAMESPACE_TIER section's record
// (no chunks: nothing to reference, or more than a section may name).
NsTierRecord NamespaceTierRecord(const SnapshotNamespace& v, size_t row_bytes) {
  NsTierRecord t;
  if (!v.in_tier) return t;
  for (int side = 0; side < 2; ++side)
    for (const auto& lv : v.layers[side]) {
      uint64_t row = 0;
      for (const auto& seg : lv.segments) {
        if (seg.data != nullptr && seg.in_tier)
          t.chunks.push_back({static_cast<Side>(side), lv.layer, row, seg.rows, seg.tier_offset});
        row += seg.rows;
      }
    }
  if (t.chunks.size() > kSnapMaxNsTierChunks) {
    t.chunks.clear();
    return t;
  }
  t.ns = v.ns;
  t.incarnation = v.incarnation;
  t.row_bytes = static_cast<uint32_t>(row_bytes);
  t.value_len = v.tier_value_len;
  t.extent = v.tier;
  return t;
}

Status WriteAll(Env* env, WritableFile* f, const SnapHeader& header,
                const std::vector<SnapshotNamespace>& views,
                const std::vector<SnapshotString>* strings, bool tier_refs, SnapshotStats* st) {
  SnapWriter sw(f, header.generation);
  uint8_t hdr[kSnapHeaderSize];
  EncodeSnapHeader(header, hdr);
  PION_RETURN_IF_ERROR(sw.out().Write(hdr));
  for (const auto& v : views) {
    RegisterRec r;
    r.ns = v.ns;
    r.incarnation = v.incarnation;
    r.kv_dim = v.kv_dim;
    r.fmt = v.fmt;
    r.lru_stamp = v.lru_stamp;
    if (v.blocks && !v.blocks->hashes.empty()) {
      r.has_blocks = true;
      r.block_size = v.blocks->block_size;
      r.hash_count = v.blocks->hashes.size();
      r.hashes = reinterpret_cast<const uint8_t*>(v.blocks->hashes.data());
    } else if (v.blocks) {
      r.has_blocks = true;
      r.block_size = v.blocks->block_size;
    }
    std::vector<uint8_t> p;
    if (v.parent.empty()) {
      EncodeSnapNamespace(r, &p);
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapNamespace, p, {}));
    } else {
      // The views list a parent before its children (store: by depth).
      r.parent = v.parent;
      r.parent_incarnation = v.parent_incarnation;
      EncodeSnapNamespaceChild(r, &p);
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapNamespaceChild, p, {}));
    }
    ++st->namespaces;
    size_t rb = quant::RowBytes(v.fmt, v.kv_dim);
    // Chunks in the disk tier: referenced after the ROWS (version 8), or copied.
    NsTierRecord t;
    if (tier_refs) t = NamespaceTierRecord(v, rb);
    const bool refs = !t.chunks.empty();
    for (int side = 0; side < 2; ++side)
      for (const auto& lv : v.layers[side])
        PION_RETURN_IF_ERROR(WriteLayer(sw, v, static_cast<Side>(side), lv, rb, refs, st));
    if (refs) {
      std::vector<uint8_t> tp;
      EncodeSnapNamespaceTier(t, &tp);
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapNamespaceTier, tp, {}));
      ++st->ns_tier_refs;
      for (const NsTierChunkRecord& c : t.chunks) st->tier_rows += c.rows;
    }
  }
  const uint64_t rows_sections = sw.sections() - sw.pads() - st->namespaces - st->ns_tier_refs;
  uint64_t blocks = 0;
  if (strings != nullptr) {
    for (const SnapshotString& k : *strings) {
      if (tier_refs && k.in_tier) {  // a reference to the value's extent (version 7)
        StrTierRecord t;
        t.key = k.key;
        t.expire_at_ms = k.expire_at_ms;
        t.lru_stamp = k.lru_stamp;
        t.value_len = k.size;
        t.extent = k.tier;
        std::vector<uint8_t> p;
        EncodeSnapStringTier(t, &p);
        PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapStringTier, p, {}));
        ++st->strings;
        ++st->tier_refs;
        continue;
      }
      StrSetRec r;
      r.key = k.key;
      r.expire_at_ms = k.expire_at_ms;
      r.lru_stamp = k.lru_stamp;
      std::vector<uint8_t> p;
      EncodeStrSetPrefix(r, k.size, true, &p);
      std::span<const uint8_t> value[1] = {std::span<const uint8_t>(k.data, k.size)};
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapString, p, value));
      ++st->strings;
    }
    // Blocks' links after every string (a link names a key loaded before it).
    for (const SnapshotString& k : *strings) {
      if (!k.is_block) continue;
      StrBlockRecord r;
      r.key = k.key;
      r.has_parent = k.has_parent;
      r.parent = k.parent;
      r.has_hash = k.has_hash;
      r.hash = k.hash;
      r.tokens = k.tokens;
      std::vector<uint8_t> p;
      EncodeSnapBlock(r, &p);
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapBlock, p, {}));
      ++blocks;
    }
    // Quantized blocks' formats (version 6), after the BLOCK sections.
    for (const SnapshotString& k : *strings) {
      if (k.quant.row == 0) continue;
      StrQuantRecord r;
      r.key = k.key;
      r.quant = k.quant;
      std::vector<uint8_t> p;
      EncodeSnapQuant(r, &p);
      PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapQuant, p, {}));
      ++blocks;
    }
  }
  SnapEndRec end{st->namespaces, rows_sections, st->rows, st->row_bytes, st->strings};
  std::vector<uint8_t> p;
  EncodeSnapEnd(end, &p);
  PION_RETURN_IF_ERROR(sw.Section(RecordType::kSnapEnd, p, {}));
  PION_RETURN_IF_ERROR(sw.out().Flush());
  st->sections = sw.sections();
  st->file_bytes = sw.out().offset();
  (void)env;
  return Status::OK();
}

Status BadAt(const std::string& path, uint64_t off, std::string_view why, uint64_t* bad) {
  if (bad) *bad = off;
  return Status::Corruption("snapshot " + path + " corrupt at offset " + std::to_string(off) +
                            ": " + std::string(why));
}

// A string-key section applied (no sink: checked only). The sink refusing it
// makes the section bad.
Status ApplyTo(RecordSink* sink, const Record& r, const std::string& path, uint64_t off,
               uint64_t* bad) {
  if (sink == nullptr) return Status::OK();
  Status s = sink->Apply(r);
  return s.ok() ? s : BadAt(path, off, s.message(), bad);
}

// The section CRCs of a mapped snapshot, verified on `threads` threads (the
// caller's included) before the sequential pass decodes and applies the
// sections: that pass's cost was this verification (one read of every page,
// with its faults, on one core). The headers are walked first (lengths only;
// the walk stops at the first header that does not fit the file, and the
// sequential pass reports it); the sections are handed out in runs of about
// kRunBytes, so a file of many small STRING sections is not one atomic
// operation per section.
struct Verified {
  std::vector<uint64_t> offs;  // section offsets, file order
  std::vector<uint8_t> ok;     // 1: that section's CRC matched
  uint32_t threads = 1;        // that verified them
};

Verified VerifySections(const uint8_t* data, uint64_t size, uint64_t gen, uint32_t threads) {
  constexpr uint64_t kRunBytes = 1 << 20;
  Verified v;
  std::vector<size_t> runs;  // index of each run's first section
  uint64_t run_bytes = kRunBytes;
  for (uint64_t off = kSnapHeaderSize; off < size && size - off >= kRecordHeaderSize;) {
    const uint64_t len = GetU32(data + off + 4);
    if (len > size - off - kRecordHeaderSize) break;
    if (run_bytes >= kRunBytes) {
      runs.push_back(v.offs.size());
      run_bytes = 0;
    }
    run_bytes += kRecordHeaderSize + len;
    v.offs.push_back(off);
    off += kRecordHeaderSize + len;
  }
  v.ok.assign(v.offs.size(), 0);
  runs.push_back(v.offs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t r; (r = next.fetch_add(1, std::memory_order_relaxed)) + 1 < runs.size();) {
      for (size_t i = runs[r]; i < runs[r + 1]; ++i) {
        const uint8_t* hdr = data + v.offs[i];
        std::span<const uint8_t> pieces[1] = {
            std::span<const uint8_t>(hdr + kRecordHeaderSize, GetU32(hdr + 4))};
        v.ok[i] = RecordCrc(gen, hdr, pieces) == GetU32(hdr) ? 1 : 0;
      }
    }
  };
  std::vector<std::thread> helpers;
  for (uint32_t t = 1; t < threads && t + 1 < runs.size(); ++t) helpers.emplace_back(work);
  work();
  for (std::thread& h : helpers) h.join();
  v.threads = static_cast<uint32_t>(helpers.size() + 1);
  return v;
}

}  // namespace

Status WriteSnapshot(Env* env, const std::string& path, const SnapHeader& header,
                     const std::vector<SnapshotNamespace>& views, SnapshotStats* stats,
                     const std::vector<SnapshotString>* strings, const SnapshotWriteOptions* opts) {
  uint64_t t0 = MonotonicNs();
  SnapshotStats st;
  st.header = header;
  std::string tmp = path + ".tmp";
  auto f = env->NewWritableFile(tmp);
  if (!f.ok()) return f.status();
  Status s =
      WriteAll(env, f->get(), header, views, strings, opts != nullptr && opts->tier_refs, &st);
  if (s.ok()) s = (*f)->Sync();
  if (s.ok()) s = (*f)->Close();
  // What the file references must be durable before the file can replace anything.
  if (s.ok() && opts != nullptr && opts->before_rename) s = opts->before_rename();
  if (s.ok()) s = env->Rename(tmp, path);
  if (!s.ok()) {
    (void)(*f)->Close();
    (void)env->RemoveFile(tmp);
    return s;
  }
  PION_RETURN_IF_ERROR(env->SyncDir(DirName(path)));
  st.seconds = static_cast<double>(MonotonicNs() - t0) / 1e9;
  if (stats) *stats = st;
  return Status::OK();
}

Status LoadSnapshot(Env* env, const std::string& path, RecordSink* sink, SnapshotStats* stats,
                    uint64_t* bad_offset, bool map, uint32_t verify_threads) {
  uint64_t t0 = MonotonicNs();
  // Mapped (docs/snapshot_format.md §5): sections are checked in place and rows
  // may be kept by reference; otherwise read into one reusable buffer.
  std::shared_ptr<const MappedFile> mapped;
  if (map) {
    auto m = env->MapReadOnly(path);
    if (m.ok()) {
      mapped = std::move(m).value();
    } else if (m.status().code() != Code::kNotSupported) {
      LOG_WARNING("snapshot %s: mapping failed (%s); reading it instead", path.c_str(),
                  m.status().ToString().c_str());
    }
  }
  std::unique_ptr<ReadableFile> file;
  uint64_t size = 0;
  if (mapped) {
    size = mapped->size();
  } else {
    auto fr = env->NewReadableFile(path);
    if (!fr.ok()) return fr.status();
    file = std::move(fr).value();
    auto size_r = file->Size();
    if (!size_r.ok()) return size_r.status();
    size = *size_r;
  }
  std::shared_ptr<const void> backing = mapped;
  std::vector<uint8_t> buf;
  // `len` bytes at `o` (REQUIRES o + len <= size): in the mapping, or read into `buf`.
  auto fetch = [&](uint64_t o, uint64_t len) -> Result<std::span<const uint8_t>> {
    if (mapped) return std::span<const uint8_t>(mapped->data() + o, len);
    if (buf.size() < len) buf.resize(len);
    auto n = file->ReadAt(o, len, buf.data());
    if (!n.ok()) return n.status();
    if (*n != len) return Status::Corruption("short read");
    return std::span<const uint8_t>(buf.data(), len);
  };
  SnapshotStats st;
  st.mapped = mapped != nullptr;
  uint8_t hbuf[kSnapHeaderSize] = {};
  const size_t hn = static_cast<size_t>(std::min<uint64_t>(size, kSnapHeaderSize));
  {
    auto h = fetch(0, hn);
    if (!h.ok() && h.status().code() != Code::kCorruption) return h.status();
    if (h.ok() && hn > 0) std::memcpy(hbuf, h->data(), hn);  // an empty mapping has no data()
  }
  Status hs = DecodeSnapHeader(hbuf, hn, &st.header);
  if (!hs.ok()) return BadAt(path, 0, hs.message(), bad_offset);
  const uint64_t gen = st.header.generation;
  const uint32_t version = GetU32(hbuf + 8);
  uint64_t pads = 0;
  uint64_t blocks = 0;  // BLOCK and QUANT sections (versions 5, 6), not counted in END

  uint64_t off = kSnapHeaderSize;
  uint64_t seq = 0;
  bool have_ns = false, ended = false;
  bool cur_tiered = false;  // the current namespace had its NAMESPACE_TIER section
  uint64_t ns_tiers = 0;    // NAMESPACE_TIER sections (version 8), not counted in END
  std::string cur_ns;
  uint64_t cur_inc = 0;
  size_t cur_rb = 0;
  std::vector<std::pair<std::string, uint64_t>> stamps;
  // Namespaces read so far: name -> (incarnation, kv_dim), for a child's parent.
  std::unordered_map<std::string, std::pair<uint64_t, uint32_t>> declared;
  // Mapped: the CRCs verified up front, on verify_threads threads (a section
  // the walk did not reach is verified below, in the loop).
  Verified verified;
  size_t vi = 0;
  if (mapped && verify_threads > 1) {
    verified = VerifySections(mapped->data(), size, gen, verify_threads);
    st.verify_threads = verified.threads;
  }
  uint64_t next_log = MonotonicNs() + 1000000000ull;
  while (off < size) {
    if (ended) return BadAt(path, off, "bytes after the end section", bad_offset);
    uint8_t hdr[kRecordHeaderSize];
    if (size - off < kRecordHeaderSize)
      return BadAt(path, off, "truncated section header", bad_offset);
    {
      auto h = fetch(off, kRecordHeaderSize);
      if (!h.ok()) {
        if (h.status().code() == Code::kCorruption)
          return BadAt(path, off, "short read", bad_offset);
        return h.status();
      }
      std::memcpy(hdr, h->data(), kRecordHeaderSize);
    }
    uint64_t len = GetU32(hdr + 4);
    auto type = static_cast<RecordType>(hdr[8]);
    if (hdr[9] || hdr[10] || hdr[11])
      return BadAt(path, off, "reserved bytes not zero", bad_offset);
    if (GetU64(hdr + 12) != seq + 1) return BadAt(path, off, "section out of sequence", bad_offset);
    if (len > size - off - kRecordHeaderSize)
      return BadAt(path, off, "section extends past the end of the file", bad_offset);
    auto pr = fetch(off + kRecordHeaderSize, len);
    if (!pr.ok()) {
      if (pr.status().code() == Code::kCorruption)
        return BadAt(path, off, "short read", bad_offset);
      return pr.status();
    }
    std::span<const uint8_t> payload = *pr;
    bool crc_ok;
    if (vi < verified.offs.size() && verified.offs[vi] == off) {
      crc_ok = verified.ok[vi++] != 0;
    } else {
      std::span<const uint8_t> pieces[1] = {payload};
      crc_ok = RecordCrc(gen, hdr, pieces) == GetU32(hdr);
    }
    if (!crc_ok) return BadAt(path, off, "checksum mismatch", bad_offset);
    switch (type) {
      case RecordType::kSnapNamespace:
      case RecordType::kSnapNamespaceChild: {
        RegisterRec r;
        const bool child = type == RecordType::kSnapNamespaceChild;
        Status s = child ? DecodeSnapNamespaceChild(payload, &r) : DecodeSnapNamespace(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        if (!quant::DimSupported(r.fmt, r.kv_dim))
          return BadAt(path, off, "kv_dim not supported by the format", bad_offset);
        if (child) {
          auto p = declared.find(std::string(r.parent));
          if (p == declared.end() || p->second.first != r.parent_incarnation ||
              p->second.second != r.kv_dim)
            return BadAt(path, off, "child namespace before (or unlike) its parent", bad_offset);
        }
        declared.insert_or_assign(std::string(r.ns), std::make_pair(r.incarnation, r.kv_dim));
        if (sink) {
          s = sink->Apply(r);
          if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
          stamps.emplace_back(std::string(r.ns), r.lru_stamp);
        }
        have_ns = true;
        cur_tiered = false;
        cur_ns.assign(r.ns);
        cur_inc = r.incarnation;
        cur_rb = quant::RowBytes(r.fmt, r.kv_dim);
        ++st.namespaces;
        break;
      }
      case RecordType::kSnapRows: {
        StoreRec r;
        Status s = DecodeStore(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        if (!have_ns || r.ns != cur_ns || r.incarnation != cur_inc)
          return BadAt(path, off, "rows of a namespace not declared before them", bad_offset);
        if (cur_tiered)
          return BadAt(path, off, "rows after the namespace's namespace_tier section", bad_offset);
        if (r.row_bytes != cur_rb)
          return BadAt(path, off, "row size does not match the format", bad_offset);
        if (sink) {
          if (backing) r.backing = &backing;
          s = sink->Apply(r);
          // NotFound: the namespace was evicted while loading (a smaller --max-sessions).
          if (!s.ok() && s.code() != Code::kNotFound)
            return BadAt(path, off, s.message(), bad_offset);
        }
        st.rows += r.count;
        st.row_bytes += r.rows.size();
        break;
      }
      case RecordType::kSnapString: {
        StrSetRec r;
        Status s = DecodeStrSet(payload, true, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        PION_RETURN_IF_ERROR(ApplyTo(sink, r, path, off, bad_offset));
        ++st.strings;
        break;
      }
      case RecordType::kSnapStringTier: {
        if (version < 7)
          return BadAt(path, off, "string_tier section before version 7", bad_offset);
        StrTierRecord r;
        Status s = DecodeSnapStringTier(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        PION_RETURN_IF_ERROR(ApplyTo(sink, r, path, off, bad_offset));
        ++st.strings;
        ++st.tier_refs;
        break;
      }
      case RecordType::kSnapNamespaceTier: {
        if (version < 8)
          return BadAt(path, off, "namespace_tier section before version 8", bad_offset);
        NsTierRecord r;
        Status s = DecodeSnapNamespaceTier(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        if (!have_ns || r.ns != cur_ns || r.incarnation != cur_inc || st.strings != 0)
          return BadAt(path, off, "namespace_tier section of a namespace not declared before it",
                       bad_offset);
        if (cur_tiered)
          return BadAt(path, off, "second namespace_tier section of a namespace", bad_offset);
        if (r.row_bytes != cur_rb)
          return BadAt(path, off, "row size does not match the format", bad_offset);
        if (sink) (void)sink->Apply(r);  // a bad reference drops the namespace, not the file
        cur_tiered = true;
        ++ns_tiers;
        ++st.ns_tier_refs;
        for (const NsTierChunkRecord& c : r.chunks) st.tier_rows += c.rows;
        break;
      }
      case RecordType::kSnapBlock: {
        if (version < 5) return BadAt(path, off, "block section before version 5", bad_offset);
        StrBlockRecord r;
        Status s = DecodeSnapBlock(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        PION_RETURN_IF_ERROR(ApplyTo(sink, r, path, off, bad_offset));
        ++blocks;
        break;
      }
      case RecordType::kSnapQuant: {
        if (version < 6) return BadAt(path, off, "quant section before version 6", bad_offset);
        StrQuantRecord r;
        Status s = DecodeSnapQuant(payload, &r);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        PION_RETURN_IF_ERROR(ApplyTo(sink, r, path, off, bad_offset));
        ++blocks;  // not counted in END either
        break;
      }
      case RecordType::kSnapPad: {
        if (version < 4) return BadAt(path, off, "pad section before version 4", bad_offset);
        if (len >= kSnapRowsAlign) return BadAt(path, off, "pad section too long", bad_offset);
        for (uint8_t b : payload)
          if (b != 0) return BadAt(path, off, "pad bytes not zero", bad_offset);
        ++pads;
        break;
      }
      case RecordType::kSnapEnd: {
        SnapEndRec e;
        Status s = DecodeSnapEnd(payload, &e);
        if (!s.ok()) return BadAt(path, off, s.message(), bad_offset);
        if (e.strings != st.strings || (!e.has_strings && st.strings != 0))
          return BadAt(path, off, "end section string count does not match the file", bad_offset);
        if (e.namespaces != st.namespaces || e.total_rows != st.rows ||
            e.total_row_bytes != st.row_bytes ||
            e.rows_sections != seq - pads - blocks - ns_tiers - st.namespaces - st.strings ||
            st.namespaces != st.header.namespace_count)
          return BadAt(path, off, "end section counts do not match the file", bad_offset);
        ended = true;
        break;
      }
      default:
        return BadAt(path, off, "unknown section type", bad_offset);
    }
    ++seq;
    off += kRecordHeaderSize + len;
    if (sink && MonotonicNs() >= next_log) {
      next_log = MonotonicNs() + 1000000000ull;
      double secs = static_cast<double>(MonotonicNs() - t0) / 1e9;
      LOG_NOTICE("loading snapshot: %.1f%% (%llu of %llu bytes, %llu namespaces, %.0f MB/s)",
                 100.0 * static_cast<double>(off) / static_cast<double>(size),
                 static_cast<unsigned long long>(off), static_cast<unsigned long long>(size),
                 static_cast<unsigned long long>(st.namespaces),
                 static_cast<double>(off) / 1e6 / secs);
    }
  }
  if (!ended) return BadAt(path, off, "missing end section (truncated file)", bad_offset);
  if (sink) {
    // Oldest first, so stamps (and the store's clock) come out in the saved order.
    std::sort(stamps.begin(), stamps.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [ns, stamp] : stamps) (void)sink->Apply(LruStampRec{ns, stamp});
  }
  st.sections = seq;
  st.file_bytes = size;
  st.seconds = static_cast<double>(MonotonicNs() - t0) / 1e9;
  if (stats) *stats = st;
  return Status::OK();
}

}  // namespace pion::persist
