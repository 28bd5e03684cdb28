// The glob patterns of model.freeze and the model rows' heads (util/glob.hpp): the input up to its first NUL byte
// is the pattern list (one per line), the rest the parameter name matched against it.
#include "fuzz/fuzz_support.hpp"
#include "trainer/util/glob.hpp"

TRAINER_FUZZ_TARGET(glob) {
  const auto parts = trainer::fuzz::split(data, size, '\0', 2);
  const std::string text = parts.size() > 1 ? parts[1] : "layer4.0.bn1.weight";
  const auto patterns =
      trainer::fuzz::split(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size(), '\n', 16);
  trainer::fuzz::refused_cleanly([&] { trainer::glob_match_any(patterns, text); });
  return 0;
}
