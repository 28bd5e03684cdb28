// A checkpoint's saved config as --resume, eval and export resolve it: a stranger's checkpoint carries its own
// config, read with the file's class names and checked like a config file, then used to build the model, the
// optimizer and the generators the file's state is restored into. Each input is the JSON text of that config;
// text that is not JSON ends at the parser, which the config target fuzzes. The rest is a small real checkpoint
// (small_checkpoint) saved with that config, then restored as the restore target does.
#include "fuzz/fuzz_support.hpp"
#include "trainer/config/json_text.hpp"

TRAINER_FUZZ_TARGET(saved_config) {
  const auto config =
      trainer::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), nullptr, /*exceptions=*/false);
  if (config.is_discarded()) return 0;
  std::string file;
  trainer::fuzz::refused_cleanly([&] { file = trainer::fuzz::small_checkpoint(config); });
  if (!file.empty()) trainer::fuzz::restore_everything(trainer::fuzz::scratch().write("last.pt", file));
  return 0;
}
