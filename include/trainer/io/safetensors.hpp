// safetensors, the format the Python ecosystem exchanges weights in: an 8-byte little-endian header length N,
// N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "text"}}, then the data area that the offsets index (row-major, little-endian).
//   write_safetensors("model.safetensors", model_state(*model), {{"arch", "resnet18"}});
//   TensorFile f = read_safetensors("model.safetensors");  // every header field checked first
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct TensorFile {
  NamedTensors tensors;                         // in name order
  std::map<std::string, std::string> metadata;  // the "__metadata__" object
};

// The reference implementation's bound: real headers are kilobytes to a few megabytes.
constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// Checks the header against the file before reading any tensor: length bounded and inside the file, valid
// JSON without duplicate names, known dtypes, byte spans equal to shape x dtype size, inside the data area and
// not overlapping. Throws WeightsError naming the file (and the tensor); never reads past the end of the file.
TensorFile read_safetensors(const std::filesystem::path& path);

// The file's bytes: CPU copies of the tensors, row-major whatever their memory format. Throws WeightsError
// naming `source` for a dtype safetensors cannot hold or a repeated name.
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                              const std::string& source);

// safetensors_bytes, written atomically (temp file + rename).
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace trainer
