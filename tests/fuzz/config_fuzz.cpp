// The config loader and the resolve step above it (engine/resolve_config.hpp: the data kind's and the model's rules,
// the published weights' eval transform) as `trainer --config FILE --set ...` calls them: the input up to its
// first NUL byte is the JSON file, and each line after it one --set assignment.
#include "fuzz/fuzz_support.hpp"
#include "trainer/engine/resolve_config.hpp"

TRAINER_FUZZ_TARGET(config) {
  auto parts = trainer::fuzz::split(data, size, '\0', 2);
  const auto file = trainer::fuzz::scratch().write("config.json", parts[0]);
  std::vector<std::string> overrides;
  if (parts.size() == 2)
    overrides = trainer::fuzz::split(reinterpret_cast<const uint8_t*>(parts[1].data()), parts[1].size(), '\n', 64);
  trainer::fuzz::refused_cleanly([&] { trainer::resolve_config(file, overrides); });
  return 0;
}
