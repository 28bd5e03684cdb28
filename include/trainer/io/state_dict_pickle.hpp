// The pickle machine under read_torch_state_dict (torch_state_dict.hpp): a state dict's data.pkl read into
// values. It knows only what a state dict holds: dict (and OrderedDict), list, tuple, numbers, strings, and tensors
// rebuilt from storages (torch._utils._rebuild_tensor_v2 / _rebuild_parameter), whose contents a loader gives it;
// any other class a pickle names is refused, never run.
//   PickleValuePtr top = unpickle_state_dict(file, pickle, [&](key, dtype, numel) { return storage_bytes(...); });
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

// The callables a state dict's pickle may name; each is applied by the machine's REDUCE, never looked up elsewhere.
enum class PickleCallable { ordered_dict, rebuild_tensor, rebuild_parameter };
struct PickleValue;
using PickleValuePtr = std::shared_ptr<PickleValue>;

// One pickled value. Lists and dicts are shared (the pickle's memo refers to them, and APPENDS/SETITEMS change
// them in place).
struct PickleValue {
  enum class Kind { none, boolean, integer, real, text, tuple, list, dict, tensor, storage_class, callable, mark };
  Kind kind = Kind::none;
  int64_t integer = 0;
  double real = 0;
  std::string text;                                                // text; a storage class's or callable's name
  std::vector<PickleValuePtr> items;                               // tuple, list
  std::vector<std::pair<PickleValuePtr, PickleValuePtr>> entries;  // dict, in insertion order
  torch::Tensor tensor;                                            // tensor; a storage's flat contents
  PickleCallable callable = PickleCallable::ordered_dict;
  uint32_t nesting = 0;  // 0 for a scalar; a container: 1 + its deepest item's
};

// A storage's contents, `numel` elements of `dtype`, by its key in the archive (data/KEY). Throws WeightsError
// naming the file when it is missing or of another size.
using StorageLoader = std::function<torch::Tensor(const std::string& key, torch::Dtype dtype, int64_t numel)>;

// The pickle's top value. Throws WeightsError naming `file` for an instruction or class a state dict does not hold.
PickleValuePtr unpickle_state_dict(const std::string& file, const std::string& pickle, const StorageLoader& storage);

}  // namespace trainer
