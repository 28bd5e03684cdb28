// Opening a checkpoint as --resume, eval and export do (io/checkpoint.hpp): the step peeked from its metadata to
// order a run folder, then the full open: our CRC-32 check, LibTorch's archive, the metadata's JSON and fields.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/checkpoint.hpp"

TRAINER_FUZZ_TARGET(checkpoint) {
  const auto file = trainer::fuzz::scratch().write("last.pt", {reinterpret_cast<const char*>(data), size});
  trainer::fuzz::refused_cleanly([&] { trainer::peek_checkpoint_step(file); });
  trainer::fuzz::refused_cleanly([&] { trainer::LoadedCheckpoint checkpoint(file); });
  return 0;
}
