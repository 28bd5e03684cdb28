// A run folder's metrics files as --resume and `trainer plot` read them: metrics.jsonl up to the input's first NUL
// byte and metrics.csv after it, kept up to the resumed step by MetricsSink (io/metrics_sink.hpp), and the rows
// read back for the curves (plot/curves.hpp).
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/metrics_sink.hpp"
#include "trainer/plot/curves.hpp"

TRAINER_FUZZ_TARGET(metrics) {
  const auto& scratch = trainer::fuzz::scratch();
  const auto parts = trainer::fuzz::split(data, size, '\0', 2);
  const auto jsonl = scratch.write("metrics.jsonl", parts[0]);
  scratch.write("metrics.csv", parts.size() > 1 ? parts[1] : "");
  trainer::fuzz::refused_cleanly([&] {
    for (const auto& row : trainer::read_metrics_jsonl(jsonl)) (void)row;
  });
  trainer::fuzz::refused_cleanly([&] { trainer::MetricsSink sink(scratch.path(), /*resume_step=*/3, false); });
  return 0;
}
