// Failed writes as one-line errors: "cannot write runs/r/last.pt: No space left on device (it needs 4.6 MiB;
// 1.2 MiB free there)". Every file the trainer writes goes through these, so a full or failing disk ends a run
// with the file and the cause, never an abort.
//   out << line << std::flush;
//   check_written(out, path);
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <system_error>

#include "trainer/util/error.hpp"

namespace trainer {

// The error for `file` failing with `cause`; with `needed`, the bytes the file needs and the free space of its
// file system.
WriteError write_failure(const std::filesystem::path& file, const std::error_code& cause,
                         std::optional<uint64_t> needed = {});

// Throws write_failure(file, errno's cause) when `out` has failed (after a write and flush).
void check_written(const std::ostream& out, const std::filesystem::path& file);

// Free bytes for an unprivileged writer in the file system that holds `dir` (nullopt when unknown).
std::optional<uint64_t> free_bytes(const std::filesystem::path& dir);

// "4.6 MiB", "812 KiB", "37 bytes".
std::string byte_size(uint64_t bytes);

}  // namespace trainer
