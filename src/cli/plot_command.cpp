#include <cstdio>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/plot/curves.hpp"

namespace trainer {

namespace {

// `trainer plot RUN_DIR`: curves.png from the run's metrics.jsonl.
struct PlotArgs {
  std::string run_dir;
};

}  // namespace

int run_plot(const PlotArgs& args) {
  const auto png = plot_run(args.run_dir);
  std::printf("wrote %s\n", png.string().c_str());
  return 0;
}

void add_plot_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand("plot", "draw RUN_DIR/curves.png from the run's metrics");
  cmd->add_option("run_dir", args->run_dir, "run folder (holds metrics.jsonl)")->required();
  commands.push_back({cmd, [args] { return run_plot(*args); }});
}

}  // namespace trainer
