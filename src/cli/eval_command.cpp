#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>

#include "trainer/cli/checkpoint_config.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/data/sources.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

int run_eval(const EvalArgs& args) {
  if (args.checkpoint.empty()) throw UsageError("eval needs --checkpoint FILE");
  const LoadedCheckpoint checkpoint(args.checkpoint);
  const Config c = config_for_checkpoint(checkpoint, args.config, args.overrides).config;
  apply_threads(c.run);
  const torch::Device device = select_device(c.run.device);
  const auto data = make_source(c, Split::eval);
  auto model = build_model(c.model, data->shape());
  checkpoint.restore_model(*model);
  place_model(*model, device, c.model.channels_last);
  auto logs = make_run_logs({});
  auto bad = std::make_shared<BadSamples>("eval", data->size(), c.data.max_bad_fraction, logs.main);
  const EvalResult r = evaluate(*model, data, eval_options(c, device, bad));
  if (r.dropped)
    logs.main->warn("{} unreadable image(s) left out; the figures cover the other {}", r.dropped, r.count);
  std::printf("eval %s (epoch %lld): %lld images, loss %.4f, top1 %.4f (%lld), top5 %.4f (%lld), %.1fs\n",
              args.checkpoint.c_str(), static_cast<long long>(checkpoint.meta().epoch), static_cast<long long>(r.count),
              r.loss(), r.top1(), static_cast<long long>(r.correct1), r.top5(), static_cast<long long>(r.correct5),
              r.seconds);
  if (!args.output.empty()) {
    const nlohmann::json j = {{"checkpoint", args.checkpoint}, {"epoch", checkpoint.meta().epoch},
                              {"images", r.count},             {"unreadable", r.dropped},
                              {"loss", r.loss()},
                              {"top1", r.top1()},              {"top5", r.top5()},
                              {"correct1", r.correct1},        {"correct5", r.correct5}};
    const std::string text = j.dump(2) + "\n";
    write_file_atomically(args.output, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
  }
  return 0;
}

}  // namespace trainer
