#include <cstdio>

#include "trainer/cli/commands.hpp"
#include "trainer/plot/curves.hpp"

namespace trainer {

int run_plot(const PlotArgs& args) {
  const auto png = plot_run(args.run_dir);
  std::printf("wrote %s\n", png.string().c_str());
  return 0;
}

}  // namespace trainer
