// The CRC-32 that every record of a zip archive carries (LibTorch's checkpoints and TorchScript files are zip
// archives of uncompressed records), checked against the record's bytes: LibTorch does not check them when it
// loads, so a flipped bit inside a tensor would otherwise load in silence.
//   if (auto bad = first_damaged_record(path)) throw CheckpointError(path.string() + ": " + *bad);
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace trainer {

// Nullopt when every record matches its CRC-32; else what fails: "record archive/data/12 does not match its
// CRC-32", or the archive's structure ("no zip directory", "cut short").
std::optional<std::string> first_damaged_record(const std::filesystem::path& zip);

}  // namespace trainer
