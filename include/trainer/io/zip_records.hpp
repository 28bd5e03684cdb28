// The CRC-32 that every record of a zip archive carries (LibTorch's checkpoints and TorchScript files are zip
// archives of uncompressed records), checked against the record's bytes: LibTorch does not check them when it
// loads, so a flipped bit inside a tensor would otherwise load in silence.
//   if (auto bad = first_damaged_record(bytes.data(), bytes.size())) throw CheckpointError(path + ": " + *bad);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// Nullopt when every record matches its CRC-32; else what fails: "record archive/data/12 does not match its
// CRC-32", or the archive's structure ("no zip directory", "cut short").
// `data` holds the whole archive. The directory is read as LibTorch's reader reads it: through the zip64 end
// record where one is located, each record's sizes and offset from its zip64 field where it has one.
std::optional<std::string> first_damaged_record(const char* data, size_t size);

// A damaged record (`record` its name), or a fault in the archive's structure (`record` empty).
struct ZipDamage {
  std::string record;
  std::string what;  // as first_damaged_record says it
};
// Every record that fails its CRC-32, in the directory's order; or the one structural fault that stops the walk
// (no directory, a damaged header, a record cut short or declaring more than it stores, a name given twice).
std::vector<ZipDamage> damaged_records(const char* data, size_t size);

// A record and its bytes as they lie inside the archive: stored as they are, or deflated (LibTorch compresses the
// TorchScript code and debug records of an archive).
struct ZipRecord {
  std::string name;
  bool deflated = false;
  std::string_view bytes;
  size_t inflated_size = 0;  // as the directory declares it
};
// Every stored or deflated record whose bytes lie inside the archive, as far as the directory can be walked (no
// CRC is checked: damaged_records does that). Names are as stored; LibTorch's reader matches them without regard to
// case, and a directory naming one record twice so (or exactly) is a structural fault that ends the walk.
std::vector<ZipRecord> zip_records(const char* data, size_t size);
// A record's contents, inflated when deflated; nullopt when it declares more than `most` bytes or does not inflate
// to exactly its declared size.
std::optional<std::string> record_contents(const ZipRecord& record, size_t most);

// Whether a record holds a tensor's bytes (<archive>/data/<key>): damage there spoils numbers, not structure, so
// the archive's pickles may still be read to name the tensor.
bool is_tensor_data_record(const std::string& name);

}  // namespace trainer
