// Writes a file so that a crash or failure at any instant leaves either the old file or the complete
// new one: the bytes go to a temporary file in the same folder, are flushed to disk, then renamed.
//   write_file_atomically(path, [&](const ByteSink& sink) { archive.save_to(sink); });
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>

namespace trainer {

// Appends bytes to the temporary file; returns the count written (throws on failure).
using ByteSink = std::function<size_t(const void* data, size_t size)>;

// Calls `produce` with a sink into a temporary file next to `path`, fsyncs it, renames it over `path` and
// fsyncs the folder. On any exception the temporary file is removed and `path` is untouched.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(const ByteSink&)>& produce);

}  // namespace trainer
