// WrappingEnv: a test Env that forwards every call to another Env and hands
// each writable file it opens to Wrap(), so a test can put its own file in
// front of the real one (ForwardingFile forwards everything; a test overrides
// only the calls it wants to intercept: a write, a sync).
//
// Test-only (pion_persist_testing); not thread-safe beyond what the wrapped
// Env and the test's overrides are.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "persist/env.h"

namespace pion::persist {

class ForwardingFile : public WritableFile {
 public:
  explicit ForwardingFile(std::unique_ptr<WritableFile> f) : f_(std::move(f)) {}
  Status WriteAt(uint64_t off, std::span<const uint8_t> data) override {
    return f_->WriteAt(off, data);
  }
  Status Sync() override { return f_->Sync(); }
  Status Truncate(uint64_t size) override { return f_->Truncate(size); }
  Result<uint64_t> Size() override { return f_->Size(); }
  Status Close() override { return f_->Close(); }
  void Renamed(const std::string& path) override { f_->Renamed(path); }
  Status Preallocate(uint64_t off, uint64_t len) override { return f_->Preallocate(off, len); }

 protected:
  WritableFile* inner() { return f_.get(); }

 private:
  std::unique_ptr<WritableFile> f_;
};

class WrappingEnv : public Env {
 public:
  explicit WrappingEnv(Env* base) : base_(base) {}

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    auto f = base_->NewWritableFile(p);
    if (!f.ok()) return f.status();
    return Wrap(std::move(f).value());
  }
  Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& p) override {
    auto f = base_->ReopenWritableFile(p);
    if (!f.ok()) return f.status();
    return Wrap(std::move(f).value());
  }
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& p) override {
    return base_->NewReadableFile(p);
  }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  Result<uint64_t> FileSize(const std::string& p) override { return base_->FileSize(p); }
  Status Rename(const std::string& a, const std::string& b) override { return base_->Rename(a, b); }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Status TruncateFile(const std::string& p, uint64_t n) override {
    return base_->TruncateFile(p, n);
  }
  Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  Result<std::vector<std::string>> ListDir(const std::string& d) override {
    return base_->ListDir(d);
  }
  Status CreateDir(const std::string& d) override { return base_->CreateDir(d); }
  Result<std::shared_ptr<const MappedFile>> MapReadOnly(const std::string& p) override {
    return base_->MapReadOnly(p);
  }

 protected:
  // The file the caller gets in place of `f` (which it must own).
  virtual std::unique_ptr<WritableFile> Wrap(std::unique_ptr<WritableFile> f) = 0;

 private:
  Env* base_;
};

}  // namespace pion::persist
