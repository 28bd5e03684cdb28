// A pickle's instructions walked without running any of them, before LibTorch's unpickler is given a checkpoint's
// records.
//  - pickle_structure_problem: every instruction one of Python's (protocols 0-5), every argument inside the bytes
//    (a string's declared length no longer than what follows it) and the stack used as Python's unpickler would.
//    LibTorch's unpickler allocates a declared length before it reads the bytes (a 1.5 GB string from a few bytes
//    of a checkpoint's debug record).
//  - pickle_tensor_problem: that, then every class the pickle names one a LibTorch archive names, every storage's
//    element count the size of its record, and every tensor's sizes, strides and offset inside its storage.
//    LibTorch takes all three from the pickle as written, and a tensor a few edited bytes point past its storage
//    reads whatever memory lies beyond it.
//   if (auto problem = pickle_tensor_problem(bytes, record_size)) throw CheckpointError(file + ": " + *problem);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace trainer {

// Nullopt when the walk reaches STOP with every argument in bounds, the stack used as Python's unpickler would and
// the values it builds nested no deeper than 256 and holding no cycle; else what is wrong, with its offset.
std::optional<std::string> pickle_structure_problem(std::string_view pickle);

// The size in bytes of the record holding storage `key` (for data.pkl, the record data/KEY); nullopt when the
// archive has no such record.
using StorageRecordSize = std::function<std::optional<uint64_t>(std::string_view key)>;

// Nullopt when the structure walk passes, every class named is one a LibTorch archive names (not LibTorch's
// custom C++ classes, __torch__.torch.classes.*), every type tag an attribute's type (is_archive_type) and every
// storage and tensor fits; else what is wrong, with its offset.
std::optional<std::string> pickle_tensor_problem(std::string_view pickle, const StorageRecordSize& record_size);

// Whether `type` is an attribute's type as a LibTorch archive writes it, in its code (`weight : Tensor`) and its
// type tags: Tensor, str, float, int, bool; Tuple, List, Optional or Dict of those, at most 4 deep; or an archive
// class (__torch__.___torch_mangle_3.Module), never one of LibTorch's custom C++ classes (__torch__.torch.*).
bool is_archive_type(std::string_view type, int depth = 0);

}  // namespace trainer
