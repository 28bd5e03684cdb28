// A .safetensors file (io/safetensors.hpp): the header length, the JSON header, dtypes, shapes and offsets.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/safetensors.hpp"

TRAINER_FUZZ_TARGET(safetensors) {
  const auto file = trainer::fuzz::scratch().write("weights.safetensors", {reinterpret_cast<const char*>(data), size});
  trainer::fuzz::refused_cleanly([&] { trainer::read_safetensors(file); });
  return 0;
}
