// Opening a checkpoint as --resume, eval and export do (io/checkpoint.hpp): the step peeked from its metadata to
// order a run folder, then the full open: our CRC-32 check, LibTorch's archive, the metadata's JSON and fields;
// then what --resume and eval restore from it (restore_everything; the restore and saved_config targets reach it
// more directly).
// Each input is opened as it is and with its CRC-32s made to match (a crafted file), so that LibTorch's archive
// reader, behind the CRC check, is reached too.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/checkpoint.hpp"

TRAINER_FUZZ_TARGET(checkpoint) {
  const auto open = [](const std::vector<uint8_t>& bytes) {
    const auto file = trainer::fuzz::scratch().write("last.pt", {bytes.begin(), bytes.end()});
    trainer::fuzz::refused_cleanly([&] { trainer::peek_checkpoint_step(file); });
    trainer::fuzz::restore_everything(file);
  };
  const std::vector<uint8_t> bytes(data, data + size), crafted = trainer::fuzz::with_matching_crcs(data, size);
  open(bytes);
  if (crafted != bytes) open(crafted);
  return 0;
}
