// A LibTorch archive (a checkpoint, a TorchScript file) checked before LibTorch is given it: its pickles walked
// (io/pickle_scan.hpp) with each storage's record at hand, and a checkpoint's code held to what a checkpoint's
// code is. LibTorch's reader takes a pickle's string lengths, a storage's size and a tensor's sizes, strides and
// offset as written, and compiles whatever source the archive holds.
//   if (auto problem = archive_pickle_problem(bytes.data(), bytes.size())) throw CheckpointError(file + ": " + ...);
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace trainer {

// Nullopt when every pickle record (X.pkl, whose storages are the records X/KEY, and the code's .debug_pkl
// records, which hold none) walks cleanly; else "record NAME: what is wrong". `data` holds the whole archive.
std::optional<std::string> archive_pickle_problem(const char* data, size_t size);

// Nullopt when every code record (code/**.py, the TorchScript source LibTorch compiles as it loads) declares classes
// of attributes only, as torch::serialize::OutputArchive writes them:
//   class Module(Module):
//     __parameters__ = ["weight", "bias", ]
//     __annotations__["param_groups/0"] = __torch__.___torch_mangle_17.Module
//     weight : Tensor
// else "record NAME: line N is not ...". LibTorch's compiler crashes on some source (a class constant, in a
// 2,290-byte file), and a checkpoint holds no method to compile. Not for TorchScript models, whose code is real.
std::optional<std::string> archive_code_problem(const char* data, size_t size);

}  // namespace trainer
