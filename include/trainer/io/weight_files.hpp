// The weight files model.init_from reads, told apart by their first bytes (never by their names): safetensors,
// and PyTorch's torch.save zip files (torchvision's .pth, timm's pytorch_model.bin). A format is one row of the
// table in weight_files.cpp.
//   WeightsReport r = load_weights(*model, read_weights_file(path), exclude, path.string());
#pragma once

#include <filesystem>

#include "trainer/io/safetensors.hpp"

namespace trainer {

// The file's tensors by name. Throws WeightsError naming the file: missing, a format not read (naming those
// that are), or whatever its format's reader finds wrong.
NamedTensors read_weights_file(const std::filesystem::path& path);

}  // namespace trainer
