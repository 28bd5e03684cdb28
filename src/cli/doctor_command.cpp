// `trainer doctor`: "will my run work on this machine?", one line per check (ok / warning / failed + hint).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace {

// `trainer doctor`: checks of the runtime, each CUDA device and, with a config, its data and output folder.
struct DoctorArgs {
  std::string config;                  // --config FILE (optional)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output_dir;              // --output-dir DIR: the run folder to check (default: run.output_dir/run.name)
};

}  // namespace

namespace fs = std::filesystem;

namespace {

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

std::string mib(double bytes) { return format_number(std::round(bytes / (1024.0 * 1024.0) * 10) / 10) + " MiB"; }
std::string gib(double bytes) {
  return format_number(std::round(bytes / (1024.0 * 1024.0 * 1024.0) * 10) / 10) + " GiB";
}

// The BLAS library mapped into this process: Debian's LibTorch uses whichever libblas.so.3 the alternatives
// system points at, and the generic reference one is several times slower for linear layers.
std::string loaded_blas() {
  std::string found;
  for (const std::string& path : loaded_library_paths()) {
    for (const char* name : {"openblas", "mkl_rt", "libmkl", "blis", "/blas/libblas", "libblas"})
      if (path.find(name) != std::string::npos && found.empty()) found = path;
  }
  return found;
}

void check_runtime(Report& report) {
  const std::string parallel = at::get_parallel_info();
  const bool openmp = parallel.find("OpenMP") != std::string::npos;
  report.add(Verdict::ok, "libtorch",
             "LibTorch " + compat::torch_version() + ", CUDA " + (torch::cuda::is_available() ? "yes" : "no") +
                 ", cuDNN " + (torch::cuda::cudnn_is_available() ? "yes" : "no") + ", parallel backend " +
                 (openmp ? "OpenMP" : "native"));
  const std::string blas = loaded_blas();
  if (blas.empty())
    report.add(Verdict::warning, "blas", "no BLAS library found mapped in the process",
               "on Debian, install libopenblas0-pthread");
  else if (blas.find("/blas/libblas") != std::string::npos)
    report.add(Verdict::warning, "blas", "reference BLAS " + blas + " (slow linear layers)",
               "apt-get install libopenblas0-pthread");
  else report.add(Verdict::ok, "blas", blas);
  const unsigned cores = std::thread::hardware_concurrency();
  const int threads = at::get_num_threads();
  report.add(threads > static_cast<int>(cores) ? Verdict::warning : Verdict::ok, "threads",
             std::to_string(threads) + " intra-op, " + std::to_string(at::get_num_interop_threads()) + " inter-op, " +
                 std::to_string(cores) + " cores",
             threads > static_cast<int>(cores) ? "more threads than cores slows training: set run.threads" : "");
}

// Name and total memory through the CUDA driver API, loaded at run time so CPU builds need no CUDA headers.
struct DriverInfo {
  std::string name;
  size_t total = 0;
};
DriverInfo cuda_driver_info(int index) {
  DriverInfo info;
  void* lib = load_cuda_driver();
  if (!lib) return info;
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int);
  using Name = int (*)(char*, int, int);
  using Total = int (*)(size_t*, int);
  auto init = reinterpret_cast<Init>(library_symbol(lib, "cuInit"));
  auto get = reinterpret_cast<Get>(library_symbol(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<Name>(library_symbol(lib, "cuDeviceGetName"));
  auto total = reinterpret_cast<Total>(library_symbol(lib, "cuDeviceTotalMem_v2"));
  int device = 0;
  char buffer[256] = {};
  if (init && get && name && init(0) == 0 && get(&device, index) == 0 && name(buffer, sizeof(buffer) - 1, device) == 0)
    info.name = buffer;
  if (total && get && get(&device, index) == 0) total(&info.total, device);
  return info;
}

void check_cuda_device(Report& report, int index) {
  const std::string label = "cuda:" + std::to_string(index);
  const DriverInfo info = cuda_driver_info(index);
  try {
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    // A real allocation of 256 MiB, written and read back.
    auto block = torch::ones({64 * 1024 * 1024}, torch::TensorOptions().device(device));
    const double sum = block.sum().item<double>();
    block.reset();
    // A matrix product, against the CPU's.
    torch::manual_seed(0);
    const auto a = torch::randn({512, 512}), b = torch::randn({512, 512});
    const double error = (a.to(device).mm(b.to(device)).cpu() - a.mm(b)).abs().max().item<double>();
    // One float16 autocast step with the loss scaler, on a small linear model.
    torch::nn::Linear linear(64, 10);
    linear->to(device);
    const auto before = linear->weight.detach().clone();
    AmpConfig amp;
    amp.enabled = true;
    amp.dtype = AmpDtype::float16;
    LossScaler scaler(amp, true);
    torch::optim::SGD sgd(linear->parameters(), torch::optim::SGDOptions(0.1));
    torch::Tensor loss;
    {
      compat::AutocastGuard autocast(torch::kCUDA, torch::kHalf);
      const auto x = torch::randn({32, 64}, torch::TensorOptions().device(device));
      const auto y = torch::randint(10, {32}, torch::TensorOptions().device(device).dtype(torch::kLong));
      loss = torch::nn::functional::cross_entropy(linear(x).to(torch::kFloat), y);
    }
    scaler.scale(loss).backward();
    const bool overflow = scaler.unscale(linear->parameters());
    if (!overflow) sgd.step();
    scaler.update(overflow);
    const bool moved = !torch::equal(before, linear->weight.detach());
    const bool good = sum == 64.0 * 1024 * 1024 && error < 1e-2 && std::isfinite(loss.item<double>()) && moved;
    report.add(good ? Verdict::ok : Verdict::failed, label,
               (info.name.empty() ? std::string("CUDA device") : info.name) +
                   (info.total ? ", " + gib(static_cast<double>(info.total)) : std::string()) +
                   ": 256 MiB allocation, 512x512 matmul (max error " + format_number(error) +
                   "), float16 autocast + loss scaler step " + (good ? "all fine" : "FAILED"),
               good ? "" : "check the driver and CUDA versions against this LibTorch build");
  } catch (const std::exception& e) {
    report.add(Verdict::failed, label,
               (info.name.empty() ? std::string() : info.name + ": ") +
                   std::string(e.what()).substr(0, std::string(e.what()).find('\n')),
               "check the driver (nvidia-smi) and that LibTorch was built for this CUDA");
  }
}

// The channels_last self-check (models/layout_check.hpp) for the config's model at its image size on its device,
// or, without a config, for a ResNet-18 with the small stem at 32x32 on the CPU: its last stage's 1x1 stride-2
// convolution (256 -> 512 channels on 8x8 maps) is the shape seen computed wrongly by one LibTorch build.
void check_layout(Report& report, const Config* config, const std::optional<ImageShape>& shape) {
  ModelConfig model;
  ImageShape input{32, 32, 3};
  torch::Device device = torch::kCPU;
  if (config) {
    model = config->model;
    if (model.num_classes == 0) model.num_classes = 10;  // resolved from the data at run time; any count probes alike
    input = shape.value_or(
        ImageShape{config->data.augment.image_size, config->data.augment.image_size, config->model.in_channels});
    try {
      device = select_device(config->run.device);
    } catch (const Error&) {
      return;  // reported by the config and cuda lines
    }
  } else {
    model.arch = "resnet18";
    model.stem = StemKind::small;
    model.in_channels = 3;
    model.num_classes = 10;
  }
  const std::string subject =
      model.arch + " at " + std::to_string(input.height) + "x" + std::to_string(input.width) + " on " + device.str();
  try {
    const KernelLayout layout = choose_layout(true, model_layout_probe(model, input, device), subject);
    if (layout.warning.empty())
      report.add(Verdict::ok, "layout",
                 "channels_last kernels match a float64 reference for " + subject + " (relative error " +
                     describe_error(layout.error) + ")");
    else
      report.add(Verdict::warning, "layout", layout.warning,
                 "runs asking for channels_last fall back by themselves; model.channels_last false avoids the check");
  } catch (const Error& e) {
    report.add(Verdict::failed, "layout", e.message(), "use another LibTorch build");
  } catch (const std::exception& e) {
    report.add(Verdict::failed, "layout",
               subject + ": " + std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
  }
}

// Reads whole files evenly spread over a folder dataset, as the loader's first epoch does: at most `max_files`, for
// at most `budget_s` seconds. Files the operating system has cached (a second doctor run) read faster.
struct ReadRate {
  size_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};
ReadRate measure_read_rate(const FolderSource& folder, size_t max_files, double budget_s) {
  ReadRate r;
  const size_t n = folder.size(), sample = std::min(n, max_files);
  std::vector<uint8_t> bytes;
  const auto start = Clock::now();
  for (size_t i = 0; i < sample && seconds_since(start) < budget_s; ++i)
    if (!read_file(folder.file(i * n / sample), bytes)) {
      ++r.files;
      r.bytes += bytes.size();
    }
  r.seconds = seconds_since(start);
  return r;
}

// The disk against the decoders: a slow disk, a network share or an antivirus scanning every JPEG as it is
// opened (Windows Defender's real-time protection does) shows here as a read rate below what the workers decode.
void report_read_rate(Report& report, const ReadRate& r, double decode_per_s_per_worker, int workers) {
  if (r.files == 0 || r.seconds <= 0) return;
  const double files_per_s = r.files / r.seconds, mb_per_s = r.bytes / r.seconds / 1e6;
  const int decoders = std::max(1, std::min<int>(workers, static_cast<int>(std::thread::hardware_concurrency())));
  const double decode_per_s = decode_per_s_per_worker * decoders;
  std::string detail = "read " + std::to_string(r.files) + " files in " +
                       format_number(std::round(r.seconds * 100) / 100) +
                       " s: " + format_number(std::round(files_per_s)) + " files/s, " +
                       format_number(std::round(mb_per_s * 10) / 10) + " MB/s; " + std::to_string(decoders) +
                       " worker(s) decode about " + format_number(std::round(decode_per_s)) + " images/s";
  if (files_per_s < decode_per_s)
    report.add(Verdict::warning, "disk", detail + ": the disk, not the decoders, would set the pace",
               "copy the data to a local SSD; on Windows, exclude the data folder from real-time antivirus scanning "
               "(Windows Security, Virus & threat protection settings, Exclusions)");
  else report.add(Verdict::ok, "disk", detail);
}

// Returns the training image shape when the train split opens.
std::optional<ImageShape> check_data(Report& report, const Config& c) {
  std::optional<ImageShape> shape;
  for (const Split split : {Split::train, Split::eval}) {
    const char* name = split == Split::train ? "data train" : "data eval";
    std::shared_ptr<const ImageSource> source;
    try {
      source = make_source(c, split);
    } catch (const Error& e) {
      report.add(Verdict::failed, name, e.what(), "check data.root and the layout in README (data)");
      continue;
    }
    if (split == Split::train) shape = source->shape();
    // The read rate first, while the files are not yet in the system's cache; then the decode sample reads
    // every fourth of the same files, cached, so its time is the decoders'.
    std::optional<ReadRate> read_rate;
    if (split == Split::train && data_kind_row(c.data.kind).image_files) {
      try {
        // The opened split itself when it is a folder; else (a subset of one) the folder opened again.
        const auto* folder = dynamic_cast<const FolderSource*>(source.get());
        read_rate = measure_read_rate(
            folder ? *folder : *open_image_folder(c.data, true, c.model.num_classes, c.model.in_channels), 256, 3.0);
      } catch (const Error&) {
      }
    }
    // Decode an evenly spaced sample: bad files show up now, not hours into the run.
    const size_t n = source->size(), sample = std::min<size_t>(n, 64);
    std::vector<std::string> bad;
    const auto start = Clock::now();
    for (size_t i = 0; i < sample; ++i) {
      const size_t index = i * n / sample;
      try {
        source->read(index, {static_cast<uint64_t>(c.run.seed), 0});
      } catch (const std::exception& e) {
        bad.push_back(std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
      }
    }
    const double ms = ms_since(start);
    if (read_rate && bad.size() < sample)
      report_read_rate(report, *read_rate, (sample - bad.size()) / std::max(ms / 1000.0, 1e-9), c.data.workers);
    std::string detail = source->describe() + "; " + std::to_string(source->class_names().size()) + " classes; " +
                         std::to_string(sample - bad.size()) + "/" + std::to_string(sample) + " sampled images read (" +
                         format_number(std::round(ms / std::max<size_t>(sample, 1) * 100) / 100) + " ms each)";
    if (bad.empty()) {
      report.add(Verdict::ok, name, detail);
    } else {
      for (size_t i = 0; i < bad.size() && i < 3; ++i) detail += "; " + bad[i];
      report.add(bad.size() == sample ? Verdict::failed : Verdict::warning, name, detail,
                 "training replaces up to data.max_bad_fraction unreadable images; remove or fix these files");
    }
  }
  return shape;
}

// The nearest folder that exists at or above `p` (where the run folder would be created).
fs::path existing_ancestor(fs::path p) {
  p = fs::absolute(p);
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  return p;
}

void check_output(Report& report, const Config& c, const fs::path& run_dir, const std::optional<ImageShape>& shape) {
  const fs::path base = existing_ancestor(run_dir);
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    report.add(Verdict::failed, "output",
               run_dir.string() + ": cannot be created, " + base.string() + " is not a folder",
               "set run.output_dir or --output-dir to a folder");
    return;
  }
  // Write a checkpoint-sized file the way checkpoints are written (temporary file, fsync, rename).
  ClassifierPtr model;
  try {
    model = build_model(
        c.model, shape.value_or(ImageShape{c.data.augment.image_size, c.data.augment.image_size, c.model.in_channels}));
  } catch (const std::exception&) {
    model = nullptr;  // an unknown model is reported by the config check
  }
  double param_bytes = 0;
  if (model)
    for (const auto& t : model->parameters()) param_bytes += static_cast<double>(t.numel() * t.element_size());
  const fs::path probe = base / ".trainer-doctor-write-test";
  std::vector<char> bytes(static_cast<size_t>(std::max(param_bytes, 1024.0 * 1024.0)), 1);
  const auto start = Clock::now();
  try {
    write_file_atomically(probe, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
  } catch (const std::exception& e) {
    fs::remove(probe, ec);
    report.add(Verdict::failed, "output", base.string() + " is not writable: " + e.what(),
               "choose a writable run.output_dir or --output-dir");
    return;
  }
  const double seconds = seconds_since(start);
  fs::remove(probe, ec);
  // A checkpoint holds the weights, the optimizer's slots (SGD momentum: 1, AdamW: 2) and the EMA copy; the run
  // keeps last.pt, best.pt, keep_last step files and the epoch files, plus one temporary file while writing.
  const double slots = c.optim.name == OptimizerKind::adamw ? 2.0 : (c.optim.momentum > 0 ? 1.0 : 0.0);
  const double checkpoint = param_bytes * (1.0 + slots + (c.train.ema.enabled ? 1.0 : 0.0));
  const double files =
      3.0 + (c.train.checkpoint_every_steps > 0 ? static_cast<double>(c.train.keep_last) : 0.0) +
      (c.train.keep_every_epochs > 0 ? static_cast<double>(c.train.epochs / c.train.keep_every_epochs) : 0.0);
  const auto space = fs::space(base, ec);
  const double needed = checkpoint * files;
  const double rate = static_cast<double>(bytes.size()) / std::max(seconds, 1e-6);
  const std::string detail =
      run_dir.string() + ": writable; " + mib(static_cast<double>(bytes.size())) + " written in " +
      format_number(std::round(seconds * 1000) / 1000) + "s (" + mib(rate) + "/s); checkpoints about " +
      mib(checkpoint) + " each, up to " + mib(needed) + " kept; " +
      (ec ? std::string("free space unknown") : gib(static_cast<double>(space.available)) + " free");
  if (!ec && static_cast<double>(space.available) < needed)
    report.add(Verdict::failed, "output", detail,
               "free space or keep fewer checkpoints (train.keep_last, keep_every_epochs)");
  else if (seconds > 2.0 && rate < 50.0 * 1024 * 1024)
    report.add(Verdict::warning, "output", detail,
               "slow writes: network storage or an antivirus scanner? use a local disk");
  else report.add(Verdict::ok, "output", detail);
}

}  // namespace

int run_doctor(const DoctorArgs& args) {
  Report report;
  // The config first, so the thread counts reported are the ones the run would use.
  std::optional<Config> config;
  std::string config_error;
  if (!args.config.empty()) {
    try {
      config = resolve_config(args.config, args.overrides);
    } catch (const Error& e) {
      config_error = e.what();
    }
  }
  apply_threads(config ? config->run : RunConfig{});
  check_runtime(report);
  if (torch::cuda::is_available()) {
    for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) check_cuda_device(report, i);
  } else {
    report.add(Verdict::ok, "cuda", "no CUDA device: training runs on the CPU",
               "for a GPU, build against a CUDA LibTorch (CMake preset cuda)");
  }
  if (!config) check_layout(report, nullptr, std::nullopt);
  if (!config_error.empty())
    report.add(Verdict::failed, "config", config_error, "trainer config schema lists every key");
  if (config) {
    const Config& c = *config;
    const int64_t per_step = c.data.batch_size * c.train.accumulate_steps;
    report.add(Verdict::ok, "config",
               args.config + ": " + c.model.arch + ", " + std::to_string(c.train.epochs) + " epochs, batch " +
                   std::to_string(c.data.batch_size) +
                   (c.train.accumulate_steps > 1 ? " x " + std::to_string(c.train.accumulate_steps) +
                                                       " accumulated = " + std::to_string(per_step) + " per step"
                                                 : std::string()) +
                   ", lr " + format_number(base_learning_rate(c)) +
                   (c.optim.lr_per_256 > 0 ? " (lr_per_256 " + format_number(c.optim.lr_per_256) + " x " +
                                                 std::to_string(per_step) + " / 256)"
                                           : std::string()) +
                   ", device " + c.run.device +
                   (c.train.amp.enabled
                        ? std::string(", amp ") + (c.train.amp.dtype == AmpDtype::float16 ? "float16" : "bfloat16") +
                              (c.train.amp.cuda_only ? " (CUDA only)" : "")
                        : std::string()));
    const auto shape = check_data(report, c);
    check_layout(report, &c, shape);
    const fs::path run_dir =
        args.output_dir.empty() ? fs::path(c.run.output_dir) / c.run.name : fs::path(args.output_dir);
    check_output(report, c, run_dir, shape);
  }
  std::printf("doctor: %d check(s) failed, %d warning(s)\n", report.failed(), report.warnings());
  return report.failed() ? 1 : 0;
}

void add_doctor_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "check LibTorch, BLAS, threads, every CUDA device and, with --config, the data and output folder");
  add_config_options(*cmd, args->config, args->overrides, "config whose data, output folder and settings are checked");
  add_output_dir_option(*cmd, args->output_dir, "run folder to check (default: run.output_dir/run.name)");
  commands.push_back({cmd, [args] { return run_doctor(*args); }});
}

}  // namespace trainer
