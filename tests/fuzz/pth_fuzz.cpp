// A .pth file as `model.weights` reads it (io/torch_state_dict.hpp): the legacy-format check, every record's
// CRC-32 and declared size, LibTorch's zip reader, then the pickle machine and the storages. Each input is read
// as it is and with its CRC-32s made to match (a crafted file), so that what lies behind the CRC check is reached.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/torch_state_dict.hpp"

TRAINER_FUZZ_TARGET(pth) {
  const std::vector<uint8_t> bytes(data, data + size);
  trainer::fuzz::refused_cleanly([&] { trainer::torch_state_dict_from_bytes("fuzz.pth", bytes); });
  const std::vector<uint8_t> crafted = trainer::fuzz::with_matching_crcs(data, size);
  if (crafted != bytes)
    trainer::fuzz::refused_cleanly([&] { trainer::torch_state_dict_from_bytes("fuzz.pth", crafted); });
  return 0;
}
