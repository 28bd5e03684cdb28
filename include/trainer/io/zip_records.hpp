// The CRC-32 that every record of a zip archive carries (LibTorch's checkpoints and TorchScript files are zip
// archives of uncompressed records), checked against the record's bytes: LibTorch does not check them when it
// loads, so a flipped bit inside a tensor would otherwise load in silence.
//   if (auto bad = first_damaged_record(bytes.data(), bytes.size())) throw CheckpointError(path + ": " + *bad);
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace trainer {

// Nullopt when every record matches its CRC-32; else what fails: "record archive/data/12 does not match its
// CRC-32", or the archive's structure ("no zip directory", "cut short").
// `data` holds the whole archive (under 4 GiB: larger ones use zip64 records, which are left to the reader).
std::optional<std::string> first_damaged_record(const char* data, size_t size);

}  // namespace trainer
