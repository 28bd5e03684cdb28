// TensorBoard event files: RUN_DIR/tb/events.out.tfevents.<seconds>.<host>.<pid>, TFRecord-framed Event
// protocol buffers (tensorflow/core/util/event.proto), encoded by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first event holds file_version "brain.Event:2"; each write_scalars() call is one event, flushed, so
// `tensorboard --logdir runs` shows a run while it trains and a crash loses at most the torn last record.
//   TensorBoardWriter tb(run_dir / "tb", /*resume_step=*/std::nullopt);
//   tb.write_scalars(step, {{"train/loss", 0.42}, {"train/lr", 0.1}});
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

using Scalars = std::vector<std::pair<std::string, double>>;

class TensorBoardWriter {
 public:
  // Creates `dir` and a new event file. With resume_step, the events of earlier files are first cut to
  // step <= resume_step and folded into the new file (the old files are removed), so the curves read as one
  // run, as metrics.csv does; a resumed run never shows the steps it repeats twice. A damaged earlier file
  // is left in place untouched.
  TensorBoardWriter(const std::filesystem::path& dir, std::optional<int64_t> resume_step);

  // One event at `step`; NaN values are left out, and an event with no value is not written.
  void write_scalars(int64_t step, const Scalars& values);
  const std::filesystem::path& file() const { return file_; }

 private:
  void append(const std::string& event);
  std::filesystem::path file_;
  std::ofstream out_;
};

// The encoded Event messages (the record payloads), for the writer and for tests.
std::string encode_file_version_event(double wall_time);
std::string encode_scalars_event(double wall_time, int64_t step, const Scalars& values);
// The step field of an encoded Event (0 when absent, as protobuf defaults it).
int64_t decode_event_step(const std::string& event);

}  // namespace trainer
