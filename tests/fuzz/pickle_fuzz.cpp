// The pickle machine that reads a .pth's data.pkl (io/state_dict_pickle.hpp), on its own: a whole pickle per
// input, its storages given as zeros of the count it names (up to a bound, like a file of that size).
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/state_dict_pickle.hpp"

#include <torch/torch.h>

TRAINER_FUZZ_TARGET(pickle) {
  const std::string pickle(reinterpret_cast<const char*>(data), size);
  const auto storage = [](const std::string& key, torch::Dtype dtype, int64_t numel) {
    if (numel < 0 || numel > (int64_t{1} << 16)) throw trainer::WeightsError("fuzz.pth: storage " + key + " size");
    return torch::zeros({numel}, torch::TensorOptions().dtype(dtype));
  };
  trainer::fuzz::refused_cleanly([&] { trainer::unpickle_state_dict("fuzz.pth", pickle, storage); });
  return 0;
}
