// A LibTorch archive (a checkpoint, a TorchScript file) checked before LibTorch is given it: its pickles walked
// (io/pickle_scan.hpp) with each storage's record at hand. LibTorch's reader takes a pickle's string lengths, a
// storage's size and a tensor's sizes, strides and offset as written.
//   if (auto problem = archive_pickle_problem(bytes.data(), bytes.size())) throw CheckpointError(file + ": " + ...);
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace trainer {

// Nullopt when every pickle record (X.pkl, whose storages are the records X/KEY, and the code's .debug_pkl
// records, which hold none) walks cleanly; else "record NAME: what is wrong". `data` holds the whole archive.
std::optional<std::string> archive_pickle_problem(const char* data, size_t size);

}  // namespace trainer
