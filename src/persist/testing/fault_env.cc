// FaultEnv implementation: see fault_env.h.
#include "persist/testing/fault_env.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/check.h"

namespace pion::persist {

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultEnv* env, std::shared_ptr<FaultEnv::Node> n, std::string path)
      : env_(env), n_(std::move(n)), path_(std::move(path)) {}
  // Errors name the file as PosixEnv's do: by the path it was opened or last
  // renamed to.
  Status WriteAt(uint64_t offset, std::span<const uint8_t> data) override {
    std::lock_guard<std::mutex> l(env_->mu_);
    return env_->WriteLocked(n_, path_, offset, data);
  }
  Status Sync() override {
    std::lock_guard<std::mutex> l(env_->mu_);
    return env_->SyncLocked(n_, path_);
  }
  void Renamed(const std::string& path) override {
    std::lock_guard<std::mutex> l(env_->mu_);
    path_ = path;
  }
  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> l(env_->mu_);
    PION_RETURN_IF_ERROR(env_->DeadLocked());
    n_->data.resize(size);
    return Status::OK();
  }
  Result<uint64_t> Size() override {
    std::lock_guard<std::mutex> l(env_->mu_);
    return static_cast<uint64_t>(n_->data.size());
  }
  Status Close() override { return Status::OK(); }

 private:
  FaultEnv* env_;
  std::shared_ptr<FaultEnv::Node> n_;
  std::string path_;  // guarded by env_->mu_
};

class FaultReadableFile final : public ReadableFile {
 public:
  FaultReadableFile(FaultEnv* env, std::shared_ptr<FaultEnv::Node> n)
      : env_(env), n_(std::move(n)) {}
  Result<size_t> ReadAt(uint64_t offset, size_t n, uint8_t* dst) override {
    std::lock_guard<std::mutex> l(env_->mu_);
    if (offset >= n_->data.size()) return size_t{0};
    size_t k = std::min<uint64_t>(n, n_->data.size() - offset);
    std::copy_n(n_->data.data() + offset, k, dst);
    return k;
  }
  Result<uint64_t> Size() override {
    std::lock_guard<std::mutex> l(env_->mu_);
    return static_cast<uint64_t>(n_->data.size());
  }

 private:
  FaultEnv* env_;
  std::shared_ptr<FaultEnv::Node> n_;
};

FaultEnv::FaultEnv(uint64_t seed) : rng_(seed) {}

FaultEnv::FaultEnv(const DiskImage& image, uint64_t seed) : rng_(seed) {
  for (const auto& [p, bytes] : image) {
    auto n = std::make_shared<Node>();
    n->data = bytes;
    n->synced = bytes;
    files_[p] = n;
    durable_[p] = n;
  }
}

FaultEnv::~FaultEnv() = default;

void FaultEnv::FailNthWrite(uint64_t n, bool partial, std::string_view msg) {
  std::lock_guard<std::mutex> l(mu_);
  fail_write_at_ = writes_ + n;
  fail_partial_ = partial;
  fail_write_msg_ = std::string(msg);
}
void FaultEnv::FailNthSync(uint64_t n, std::string_view msg) {
  std::lock_guard<std::mutex> l(mu_);
  fail_sync_at_ = syncs_ + n;
  fail_sync_msg_ = std::string(msg);
}
void FaultEnv::CrashAfterNthSync(uint64_t n, CrashMode mode) {
  std::lock_guard<std::mutex> l(mu_);
  crash_at_ = syncs_ + n;
  crash_mode_ = mode;
}
void FaultEnv::SetDiskFull(bool full, bool partial, std::string_view msg) {
  std::lock_guard<std::mutex> l(mu_);
  full_ = full;
  fail_partial_ = partial;
  fail_write_msg_ = std::string(msg);
}
bool FaultEnv::crashed() const {
  std::lock_guard<std::mutex> l(mu_);
  return dead_;
}
uint64_t FaultEnv::syncs() const {
  std::lock_guard<std::mutex> l(mu_);
  return syncs_;
}
uint64_t FaultEnv::writes() const {
  std::lock_guard<std::mutex> l(mu_);
  return writes_;
}
DiskImage FaultEnv::crash_image() const {
  std::lock_guard<std::mutex> l(mu_);
  return image_;
}
DiskImage FaultEnv::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  DiskImage img;
  for (const auto& [p, n] : files_) img[p] = n->data;
  return img;
}
void FaultEnv::SetFile(const std::string& path, std::vector<uint8_t> bytes) {
  std::lock_guard<std::mutex> l(mu_);
  auto n = std::make_shared<Node>();
  n->data = bytes;
  n->synced = std::move(bytes);
  files_[path] = n;
  durable_[path] = n;
}
std::vector<uint8_t> FaultEnv::GetFile(const std::string& path) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  return it == files_.end() ? std::vector<uint8_t>{} : it->second->data;
}

Status FaultEnv::DeadLocked() const {
  if (dead_) return Status::IOError("simulated crash: the machine is off");
  return Status::OK();
}

Status FaultEnv::WriteLocked(const NodePtr& n, const std::string& path, uint64_t off,
                             std::span<const uint8_t> data) {
  PION_RETURN_IF_ERROR(DeadLocked());
  ++writes_;
  size_t len = data.size();
  bool fail = (fail_write_at_ != 0 && writes_ == fail_write_at_) || full_;
  if (fail) len = fail_partial_ ? data.size() / 2 : 0;
  if (n->data.size() < off + len) n->data.resize(off + len);
  std::copy_n(data.data(), len, n->data.data() + off);
  if (fail) return Status::IOError("write " + path + ": " + fail_write_msg_);
  return Status::OK();
}

Status FaultEnv::SyncLocked(const NodePtr& n, const std::string& path) {
  PION_RETURN_IF_ERROR(DeadLocked());
  ++syncs_;
  if (fail_sync_at_ != 0 && syncs_ == fail_sync_at_)
    return Status::IOError("fdatasync " + path + ": " + fail_sync_msg_);
  n->synced = n->data;
  AfterSyncLocked();
  return Status::OK();
}

void FaultEnv::AfterSyncLocked() {
  if (crash_at_ != 0 && syncs_ == crash_at_) TakeImageLocked(crash_mode_);
}

void FaultEnv::TakeImageLocked(CrashMode mode) {
  image_.clear();
  for (const auto& [p, n] : durable_) {
    std::vector<uint8_t> b = n->synced;
    if (n->data.size() > b.size()) {
      size_t extra = n->data.size() - b.size();
      size_t keep = static_cast<size_t>(rng_() % (extra + 1));
      switch (mode) {
        case CrashMode::kDropUnsynced:
          break;
        case CrashMode::kGarbleUnsynced:
          for (size_t i = 0; i < keep; ++i) b.push_back(static_cast<uint8_t>(rng_()));
          break;
        case CrashMode::kPartialUnsynced:
          b.insert(b.end(), n->data.begin() + static_cast<long>(b.size()),
                   n->data.begin() + static_cast<long>(b.size() + keep));
          break;
      }
    }
    image_[p] = std::move(b);
  }
  dead_ = true;
}

Result<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  auto n = std::make_shared<Node>();
  files_[path] = n;
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, n, path));
}
Result<std::unique_ptr<WritableFile>> FaultEnv::ReopenWritableFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, it->second, path));
}
Result<std::unique_ptr<ReadableFile>> FaultEnv::NewReadableFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  return std::unique_ptr<ReadableFile>(new FaultReadableFile(this, it->second));
}
namespace {
class FaultMappedFile final : public MappedFile {
 public:
  explicit FaultMappedFile(const std::vector<uint8_t>& bytes) {
    size_t n = (bytes.size() + 4095) & ~size_t{4095};
    mem_ = static_cast<uint8_t*>(std::aligned_alloc(4096, n == 0 ? 4096 : n));
    PION_CHECK(mem_ != nullptr);
    if (!bytes.empty()) std::memcpy(mem_, bytes.data(), bytes.size());
    data_ = mem_;
    size_ = bytes.size();
  }
  ~FaultMappedFile() override { std::free(mem_); }

 private:
  uint8_t* mem_ = nullptr;
};
}  // namespace

Result<std::shared_ptr<const MappedFile>> FaultEnv::MapReadOnly(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (!mappable_) return Status::NotSupported("mapping disabled: " + path);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  ++maps_;
  std::shared_ptr<const MappedFile> m(new FaultMappedFile(it->second->data));
  last_map_ = m;
  last_range_ = {m->data(), m->data() + m->size()};
  return m;
}
bool FaultEnv::LastMapInUse() const {
  std::lock_guard<std::mutex> l(mu_);
  return !last_map_.expired();
}
std::pair<const uint8_t*, const uint8_t*> FaultEnv::LastMapRange() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_range_;
}
void FaultEnv::SetMappable(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  mappable_ = on;
}
uint64_t FaultEnv::maps() const {
  std::lock_guard<std::mutex> l(mu_);
  return maps_;
}
bool FaultEnv::FileExists(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  return files_.count(path) != 0;
}
Result<uint64_t> FaultEnv::FileSize(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  return static_cast<uint64_t>(it->second->data.size());
}
Status FaultEnv::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  auto it = files_.find(from);
  if (it == files_.end()) return Status::IOError("rename " + from + ": No such file or directory");
  files_[to] = it->second;
  files_.erase(from);
  return Status::OK();
}
Status FaultEnv::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  if (files_.erase(path) == 0) return Status::IOError("unlink " + path + ": No such file");
  return Status::OK();
}
Status FaultEnv::TruncateFile(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  auto it = files_.find(path);
  if (it == files_.end()) return Status::IOError("truncate " + path + ": No such file");
  it->second->data.resize(size);
  return Status::OK();
}
Status FaultEnv::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  PION_RETURN_IF_ERROR(DeadLocked());
  ++syncs_;
  if (fail_sync_at_ != 0 && syncs_ == fail_sync_at_)
    return Status::IOError("fsync dir: " + fail_sync_msg_);
  for (auto it = durable_.begin(); it != durable_.end();) {
    if (DirName(it->first) == dir && files_.count(it->first) == 0)
      it = durable_.erase(it);
    else
      ++it;
  }
  for (const auto& [p, n] : files_)
    if (DirName(p) == dir) durable_[p] = n;
  AfterSyncLocked();
  return Status::OK();
}
Result<std::vector<std::string>> FaultEnv::ListDir(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [p, n] : files_)
    if (DirName(p) == dir) out.push_back(p.substr(p.rfind('/') + 1));
  return out;
}
Status FaultEnv::CreateDir(const std::string&) { return Status::OK(); }

}  // namespace pion::persist
