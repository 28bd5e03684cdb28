// A .pth file as `model.weights` reads it (io/torch_state_dict.hpp): the legacy-format check, every record's
// CRC-32 and declared size, LibTorch's zip reader, then the pickle machine and the storages.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/torch_state_dict.hpp"

TRAINER_FUZZ_TARGET(pth) {
  const std::vector<uint8_t> bytes(data, data + size);
  trainer::fuzz::refused_cleanly([&] { trainer::torch_state_dict_from_bytes("fuzz.pth", bytes); });
  return 0;
}
