#include "trainer/cli/doctor_checks.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// Reads whole files evenly spread over a folder dataset, as the loader's first epoch does: at most `max_files`, for
// at most `budget_s` seconds. Files the operating system has cached (a second doctor run) read faster.
struct ReadRate {
  size_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};
ReadRate measure_read_rate(const ImageSource& source, size_t max_files, double budget_s) {
  ReadRate r;
  const size_t n = source.size(), sample = std::min(n, max_files);
  std::vector<uint8_t> bytes;
  const auto start = Clock::now();
  for (size_t i = 0; i < sample && seconds_since(start) < budget_s; ++i) {
    try {
      if (!source.read_encoded(i * n / sample, bytes)) break;
    } catch (const Error&) {
      continue;
    }
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

}  // namespace

// Sets the training image shape when the train split opens.
void check_data(Report& report, DoctorContext& context) {
  const Config& c = *context.config;
  for (const Split split : {Split::train, Split::eval}) {
    const char* name = split == Split::train ? "data train" : "data eval";
    std::shared_ptr<const ImageSource> source;
    try {
      source = make_source(c, split);
    } catch (const Error& e) {
      report.add(Verdict::failed, name, e.what(), "check data.root and the layout in README (data)");
      continue;
    }
    if (split == Split::train) context.train_shape = source->shape();
    // The read rate first, while the files are not yet in the system's cache; then the decode sample reads
    // every fourth of the same files, cached, so its time is the decoders'.
    std::optional<ReadRate> read_rate;
    if (split == Split::train && data_kind_row(c.data.kind).image_files) {
      read_rate = measure_read_rate(*source, 256, 3.0);
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
}

}  // namespace trainer
