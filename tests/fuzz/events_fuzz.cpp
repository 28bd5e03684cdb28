// A run's TensorBoard event files as --resume reads them (io/tensorboard.hpp): the TFRecord frames with their CRCs
// (io/tfrecord.hpp), each event's step, and the writer that folds earlier files' events up to the resumed step
// into its own. The input is one event file; the folder is emptied before each input.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/tensorboard.hpp"
#include "trainer/io/tfrecord.hpp"

TRAINER_FUZZ_TARGET(events) {
  const auto& scratch = trainer::fuzz::scratch();
  const auto dir = scratch.path() / "tb";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file =
      scratch.write("tb/events.out.tfevents.1.host.1", std::string(reinterpret_cast<const char*>(data), size));
  trainer::fuzz::refused_cleanly([&] {
    for (const std::string& event : trainer::read_tfrecords(file)) trainer::decode_event_step(event);
  });
  trainer::fuzz::refused_cleanly([&] { trainer::TensorBoardWriter writer(dir, /*resume_step=*/5); });
  return 0;
}
