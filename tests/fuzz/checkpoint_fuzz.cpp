// Opening a checkpoint as --resume, eval and export do (io/checkpoint.hpp): the step peeked from its metadata to
// order a run folder, then the full open: our CRC-32 check, LibTorch's archive, the metadata's JSON and fields;
// then what --resume and eval restore from it: the config it saved (resolved and checked), the model built from
// that config with the file's weights, the optimizer's state and the generators'.
// Each input is opened as it is and with its CRC-32s made to match (a crafted file), so that LibTorch's archive
// reader, behind the CRC check, is reached too.
#include "fuzz/fuzz_support.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/optim/optimizer.hpp"

TRAINER_FUZZ_TARGET(checkpoint) {
  const auto open = [](const std::vector<uint8_t>& bytes) {
    const auto file = trainer::fuzz::scratch().write("last.pt", {bytes.begin(), bytes.end()});
    trainer::fuzz::refused_cleanly([&] { trainer::peek_checkpoint_step(file); });
    trainer::fuzz::refused_cleanly([&] {
      const trainer::LoadedCheckpoint checkpoint(file);
      const trainer::Config config = trainer::config_for_checkpoint(checkpoint, "", {}).config;
      const auto model = trainer::model_from_checkpoint(checkpoint, config.model, checkpoint.meta().input, false);
      const auto optimizer = trainer::make_optimizer(config.optim, *model);
      checkpoint.restore_optimizer(*optimizer);
      checkpoint.restore_rng();
    });
  };
  const std::vector<uint8_t> bytes(data, data + size), crafted = trainer::fuzz::with_matching_crcs(data, size);
  open(bytes);
  if (crafted != bytes) open(crafted);
  return 0;
}
