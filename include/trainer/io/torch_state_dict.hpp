// PyTorch's own weight files: torch.save's zip format, which torchvision's published .pth files and timm's
// pytorch_model.bin use. The zip holds ARCHIVE/data.pkl, a pickle of the state dict, and ARCHIVE/data/KEY, each
// storage's raw little-endian bytes. The pickle is read by a small machine that knows only what a state dict
// holds: OrderedDict, dict, list, tuple, numbers, strings, and tensors rebuilt from storages
// (torch._utils._rebuild_tensor_v2 / _rebuild_parameter). Any other class a pickle names is refused, never run,
// as is the legacy pre-1.6 format. (LibTorch's own pickle reader turns OrderedDict into None.)
//   NamedTensors state = read_torch_state_dict("resnet50-0676ba61.pth");  // or read_weights_file (weight_files.hpp)
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "trainer/io/safetensors.hpp"

namespace trainer {

// Whether a file's first bytes (512 are enough) are torch.save's zip format, or a legacy one (a pickle protocol 2
// header and its magic number, or the oldest tar format), which read_torch_state_dict refuses with the way to
// re-save it.
bool is_torch_zip_file(const std::vector<uint8_t>& head);
bool is_legacy_torch_file(const std::vector<uint8_t>& head);

// The file's state dict as named tensors, in the file's order. Throws WeightsError naming the file: not a zip,
// truncated or damaged (a record that fails its CRC-32), a pickled object other than the above (with its class),
// a top level that is not a dict of tensors, or a tensor outside its storage.
NamedTensors read_torch_state_dict(const std::filesystem::path& path);
// The same from the file's bytes, already in memory; `file` names it in errors.
NamedTensors torch_state_dict_from_bytes(const std::string& file, const std::vector<uint8_t>& bytes);

}  // namespace trainer
