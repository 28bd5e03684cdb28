// Writes a file so that a crash or failure at any instant leaves either the old file or the complete
// new one: the bytes go to a temporary file in the same folder, are flushed to disk, then moved over the old one.
//   write_file_atomically(path, [&](const ByteSink& sink) { archive.save_to(sink); });
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

namespace trainer {

// Appends bytes to the temporary file; returns the count given. It never throws: a failed write is raised as a
// WriteError once the producer has finished.
using ByteSink = std::function<size_t(const void* data, size_t size)>;

// Calls `produce` with a sink into a temporary file next to `path`, fsyncs it, renames it over `path` and
// fsyncs the folder. On any exception the temporary file is removed and `path` is untouched; a failed write
// (no space, I/O error, read-only, quota) is a WriteError naming `path`, the cause, the bytes the file needs and
// the free space there.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(const ByteSink&)>& produce);

// write_file_atomically for text already in memory (reports, resolved configs, metrics files).
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

// Makes `to` a second name of `from`: a hard link made beside `to` and moved over it in one step, or, where the
// file system has no hard links (FAT32, exFAT, some network shares), an atomic copy. A failure is a WriteError
// naming `to`.
void link_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace trainer
