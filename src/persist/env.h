// Env: the small filesystem interface persistence is written against, so that
// tests can swap the disk for one that fails or "crashes" (LevelDB's Env and
// fault_injection_test, SQLite's test6.c). Two implementations: PosixEnv (the
// real one) and FaultEnv (testing/fault_env.h, in memory, test-only library pion_persist_testing).
//
// Files are addressed by path. A WritableFile supports positioned writes (so a
// writer can overwrite a failed tail) and Sync (fdatasync). Directory entries
// (create, rename, remove) are durable only after SyncDir on their directory.
//
// Thread-safety: Env methods may be called concurrently. One file object may be
// written by one thread while another calls Sync on it (the WAL's sync thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pion::persist {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data` at `offset`; a short write is an error.
  virtual Status WriteAt(uint64_t offset, std::span<const uint8_t> data) = 0;
  // Makes every byte written so far durable (fdatasync).
  virtual Status Sync() = 0;
  virtual Status Truncate(uint64_t size) = 0;
  virtual Result<uint64_t> Size() = 0;
  // Closes the file; later calls are bugs. Also done by the destructor.
  virtual Status Close() = 0;
  // The file was renamed to `path` (error messages name the file that exists).
  virtual void Renamed(const std::string& path) { (void)path; }
  // Reserves disk space for [offset, offset + len) without changing the file's
  // size (fallocate FALLOC_FL_KEEP_SIZE): later writes there allocate nothing.
  // NotSupported where the Env or the filesystem cannot (the default).
  virtual Status Preallocate(uint64_t offset, uint64_t len) {
    (void)offset, (void)len;
    return Status::NotSupported("preallocation");
  }
};

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to n bytes at offset; returns the count (less only at end of file).
  virtual Result<size_t> ReadAt(uint64_t offset, size_t n, uint8_t* dst) = 0;
  virtual Result<uint64_t> Size() = 0;
};

// A whole file mapped read-only (Env::MapReadOnly): `data` stays valid and
// unchanged while the object lives (the mapping is released with it).
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 protected:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // Creates `path` (truncating an existing file).
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens an existing file for writing without truncating it.
  virtual Result<std::unique_ptr<WritableFile>> ReopenWritableFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  // Makes creations, renames and removals in `dir` durable (fsync of the directory).
  virtual Status SyncDir(const std::string& dir) = 0;
  // Names (not paths) of the entries of `dir`.
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual Status CreateDir(const std::string& dir) = 0;
  // Maps `path` read-only, its base page-aligned (PosixEnv: mmap MAP_PRIVATE,
  // PROT_READ). Default: NotSupported (the caller reads the file instead).
  virtual Result<std::shared_ptr<const MappedFile>> MapReadOnly(const std::string& path) {
    return Status::NotSupported("mapping files: " + path);
  }
};

// The process-wide POSIX Env (never destroyed).
Env* PosixEnv();

// "dir/name" (name unchanged when dir is empty or ".").
std::string JoinPath(std::string_view dir, std::string_view name);
// The directory part of a path ("." if none).
std::string DirName(std::string_view path);

}  // namespace pion::persist
