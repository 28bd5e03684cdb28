// What `trainer doctor`'s checks share: the report they add lines to, what they know of the run (the config, once
// read, and the training images' shape, once the data opened), and the table of checks, one row each, run in
// order. A new check is one function in src/cli/doctor/ and one row in doctor_checks() (doctor_command.cpp).
//   for (const DoctorCheck& c : doctor_checks()) if (context.config || !c.needs_config) c.run(report, context);
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"

namespace trainer {

enum class Verdict { ok, warning, failed };

class Report {
 public:
  void add(Verdict v, const std::string& check, const std::string& detail, const std::string& hint = "") {
    static const char* const names[] = {"ok", "warning", "failed"};
    std::printf("%-8s %-11s %s%s\n", names[static_cast<int>(v)], check.c_str(), detail.c_str(),
                hint.empty() ? "" : ("  (hint: " + hint + ")").c_str());
    std::fflush(stdout);
    if (v == Verdict::failed) ++failed_;
    if (v == Verdict::warning) ++warnings_;
  }
  int failed() const { return failed_; }
  int warnings() const { return warnings_; }

 private:
  int failed_ = 0, warnings_ = 0;
};

// "12.5 MiB", "1.2 GiB".
std::string mib(double bytes);
std::string gib(double bytes);

// What the checks know of the run; each may add to it for the ones after it.
struct DoctorContext {
  std::string config_file;                // --config (empty: none given)
  std::optional<Config> config;           // read and resolved; none without --config or when it failed
  std::string config_error;               // why it failed
  std::filesystem::path run_dir;          // --output-dir, else run.output_dir/run.name
  std::optional<ImageShape> train_shape;  // the training images' shape, once the train split opened
};

struct DoctorCheck {
  const char* name;
  bool needs_config;  // skipped without a config that reads
  void (*run)(Report& report, DoctorContext& context);
};

// In the order they run and print.
const std::vector<DoctorCheck>& doctor_checks();

// The rows' functions (src/cli/doctor/*.cpp).
void check_runtime(Report& report, DoctorContext& context);       // LibTorch, BLAS, threads
void check_cuda_devices(Report& report, DoctorContext& context);  // each device: memory, matmul, float16 step
void check_config(Report& report, DoctorContext& context);        // the config as the run resolves it
void check_data(Report& report, DoctorContext& context);          // both splits opened, sampled, the disk's rate
void check_layout(Report& report, DoctorContext& context);        // the channels_last self-check
void check_output(Report& report, DoctorContext& context);        // the run folder: writable, fast, room

}  // namespace trainer
