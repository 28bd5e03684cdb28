#include "trainer/io/checkpoint.hpp"

#include <torch/serialize/output-archive.h>
#include <torch/torch.h>

#include <cstdio>

#include "trainer/config/config.hpp"
#include "trainer/config/json_text.hpp"
#include "trainer/io/archive_check.hpp"
#include "trainer/io/tfrecord.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

template <class T>
json value_json(const T& value) {
  if constexpr (std::is_same_v<T, ImageShape>)
    return {{"height", value.height}, {"width", value.width}, {"channels", value.channels}};
  else return json(value);
}
json value_json(const std::optional<double>& value) { return value ? json(*value) : json(); }

template <class T>
void read_value(const json& j, T& value) {
  if constexpr (std::is_same_v<T, ImageShape>)
    value = {j.at("height").get<int64_t>(), j.at("width").get<int64_t>(), j.at("channels").get<int64_t>()};
  else value = j.get<T>();
}
void read_value(const json& j, std::optional<double>& value) {
  if (j.is_null()) value.reset();
  else value = j.get<double>();
}

// CheckpointMeta::visit() visitors: the metadata object written into, and read from, a checkpoint.
struct MetaWriter {
  json& j;
  template <class T>
  void field(const char* key, const T& value, MetaKey) {
    j[key] = value_json(value);
  }
};

struct MetaReader {
  const json& j;
  template <class T>
  void field(const char* key, T& value, MetaKey need) {
    const auto it = j.find(key);
    if (it != j.end()) read_value(*it, value);
    else if (need == MetaKey::required) j.at(key);  // throws json's "key not found" naming the key
  }
};

// CRC-32C of a tensor's bytes (on the CPU, contiguous).
std::string tensor_checksum(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(c.data_ptr(), c.nbytes()));
  return hex;
}

// "<section>/<name>" -> checksum of every parameter and buffer of `module`.
void add_module_checksums(json& sums, const std::string& section, const torch::nn::Module& module) {
  for (const auto& item : module.named_parameters()) sums[section + "/" + item.key()] = tensor_checksum(item.value());
  for (const auto& item : module.named_buffers()) sums[section + "/" + item.key()] = tensor_checksum(item.value());
}

// The first tensor under `archive` (a saved module, children included) whose checksum differs from `sums`.
std::optional<std::string> changed_tensor(torch::serialize::InputArchive& archive, const std::string& prefix,
                                          const json& sums) {
  for (const auto& key : archive.keys()) {
    torch::Tensor t;
    torch::serialize::InputArchive child;
    if (archive.try_read(key, t)) {
      const auto it = sums.find(prefix + key);
      if (it != sums.end() && *it != tensor_checksum(t)) return prefix + key;
    } else if (archive.try_read(key, child)) {
      if (auto name = changed_tensor(child, prefix + key + ".", sums)) return name;
    }
  }
  return std::nullopt;
}

void check_finite(const torch::nn::Module& model, const fs::path& path) {
  for (const auto& item : model.named_parameters())
    if (!torch::isfinite(item.value()).all().item<bool>())
      throw TrainError("parameter " + item.key() + " holds inf or NaN; " + path.string() + " was not written");
  for (const auto& item : model.named_buffers())
    if (item.value().is_floating_point() && !torch::isfinite(item.value()).all().item<bool>())
      throw TrainError("buffer " + item.key() + " holds inf or NaN; " + path.string() + " was not written");
}

// LibTorch's Module::load silently takes a saved tensor of another shape; this checks every name and shape
// and copies in place, so the optimizer's references to the parameters stay valid.
void restore_module(torch::serialize::InputArchive& archive, torch::nn::Module& module, const std::string& prefix,
                    std::vector<std::string>& problems) {
  auto restore = [&](const std::string& name, torch::Tensor& target, bool is_buffer) {
    torch::Tensor saved;
    if (!archive.try_read(name, saved, is_buffer)) {
      problems.push_back("missing " + prefix + name);
    } else if (saved.sizes() != target.sizes()) {
      problems.push_back(prefix + name + " has shape " + c10::str(saved.sizes()) + " in the checkpoint but " +
                         c10::str(target.sizes()) + " in the model");
    } else {
      target.copy_(saved);
    }
  };
  for (auto& item : module.named_parameters(/*recurse=*/false)) restore(item.key(), item.value(), false);
  for (auto& item : module.named_buffers(/*recurse=*/false)) restore(item.key(), item.value(), true);
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;  // Module::save skips these too (nn::Functional)
    torch::serialize::InputArchive sub;
    if (!archive.try_read(child.key(), sub)) problems.push_back("missing " + prefix + child.key() + ".*");
    else restore_module(sub, *child.value(), prefix + child.key() + ".", problems);
  }
}

// What LibTorch's reader says when it fails on a file that opened, as one line: its own errors (c10::Error) and
// the TorchScript object errors a crafted archive reaches (an attribute the optimizer's state lacks, a record of the
// wrong kind), which are plain std::exceptions. Our own errors pass through.
template <class Read>
std::optional<std::string> libtorch_failure(Read&& read) {
  try {
    read();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    return first_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return first_line(e.what());
  }
  return std::nullopt;
}

}  // namespace

void save_checkpoint(const fs::path& path, const CheckpointMeta& meta, const CheckpointModules& modules,
                     const GeneratorRows& ranks) {
  check_finite(modules.model, path);
  if (modules.ema) check_finite(*modules.ema, path);
  json j = {{"format_version", kCheckpointFormatVersion}};
  MetaWriter writer{j};
  CheckpointMeta(meta).visit(writer);  // visit() is not const: it visits a copy
  torch::serialize::OutputArchive archive;
  const std::string meta_text = j.dump();
  archive.write("meta", c10::IValue(meta_text));
  // Every record of the file carries its zip CRC-32, which a load checks; these name the weight a damaged
  // record belongs to.
  json sums = json::object();
  add_module_checksums(sums, "model", modules.model);
  if (modules.ema) add_module_checksums(sums, "ema", *modules.ema);
  torch::serialize::OutputArchive model_archive, optimizer_archive;
  modules.model.save(model_archive);
  modules.optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  if (modules.ema) {
    torch::serialize::OutputArchive ema_archive;
    modules.ema->save(ema_archive);
    archive.write("ema", ema_archive);
  }
  // Dropout on the GPU draws from each device's generator: saved too, so a resumed run draws the same masks.
  const auto generators = compat::GeneratorStates::capture();
  archive.write("rng_cpu", generators.cpu, /*is_buffer=*/true);
  for (size_t i = 0; i < generators.cuda.size(); ++i)
    archive.write("rng_cuda" + std::to_string(i), generators.cuda[i], /*is_buffer=*/true);
  if (ranks.cpu.defined()) archive.write("rng_ranks_cpu", ranks.cpu, /*is_buffer=*/true);
  if (ranks.cuda.defined()) archive.write("rng_ranks_cuda", ranks.cuda, /*is_buffer=*/true);
  archive.write("checksums", c10::IValue(sums.dump()));
  write_file_atomically(path, [&](const ByteSink& sink) { archive.save_to(sink); });
}

std::optional<int64_t> peek_checkpoint_step(const fs::path& path) {
  // The archive's data.pkl pickles the metadata as one string (BINUNICODE: 'X', a 4-byte little-endian length,
  // the text). Read through our own zip walk, as LibTorch's reader would find it (the folder of the directory's
  // first record, names compared lowered), no more than 64 MiB of it: the reader allocates whatever size the
  // directory declares (a 1,251-byte file asked it for 4 GiB), and --resume auto peeks at every file of a folder.
  MappedFile file;
  if (file.open(path)) return std::nullopt;
  const auto records = zip_records(file.data(), file.size());
  if (records.empty()) return std::nullopt;
  const std::string wanted = ascii_lower(records.front().name.substr(0, records.front().name.find('/')) + "/data.pkl");
  std::optional<std::string> pickle;
  for (const ZipRecord& r : records)
    if (ascii_lower(r.name) == wanted) pickle = record_contents(r, size_t{64} << 20);
  if (!pickle) return std::nullopt;
  for (size_t at = pickle->find('X'); at != std::string::npos && at + 5 <= pickle->size();
       at = pickle->find('X', at + 1)) {
    uint32_t length = 0;
    for (int b = 3; b >= 0; --b)
      length = length << 8 | static_cast<uint8_t>((*pickle)[at + 1 + static_cast<size_t>(b)]);
    if (length < 2 || length > pickle->size() - at - 5 || (*pickle)[at + 5] != '{') continue;
    const json j = parse_json(std::string_view(*pickle).substr(at + 5, length), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("format_version")) continue;
    const auto step = j.find("step");
    if (step != j.end() && step->is_number_integer()) return step->get<int64_t>();
    return std::nullopt;
  }
  return std::nullopt;
}

LoadedCheckpoint::LoadedCheckpoint(const fs::path& path)
    : path_(path), archive_(std::make_shared<torch::serialize::InputArchive>()) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw CheckpointError(path.string() + ": no such file");
  // Mapped once, whatever its size: LibTorch loads from these bytes and every check below reads the same ones.
  MappedFile file;
  if (const auto failed = file.open(path))
    throw CheckpointError(path.string() + ": cannot read (" + failed.message() + ")");
  const char* data = file.data();
  // Every byte against its record's CRC-32 before LibTorch parses any of it: its archive reader and unpickler
  // then only see pickles as they were written. Damage confined to tensor bytes is named after the archive is
  // read (the weight, where the file lists checksums).
  const auto damage = damaged_records(data, file.size());
  const auto damaged = [&](const std::string& part) {
    return CheckpointError(path.string() + ": " + part +
                           ": the file was damaged after it was written (bit rot, an interrupted copy); use an "
                           "earlier checkpoint or another copy");
  };
  for (const ZipDamage& d : damage)
    if (!is_tensor_data_record(d.record)) throw damaged(d.what);
  // The pickles walked and the code read before LibTorch's unpickler and compiler see them (io/archive_check.hpp).
  for (const auto& problem : {archive_pickle_problem(data, file.size()), archive_code_problem(data, file.size())})
    if (problem) throw CheckpointError(path.string() + ": not a trainer checkpoint or damaged (" + *problem + ")");
  c10::IValue meta_value, sums_value;
  // LibTorch's errors of either kind: a TorchScript module without our records, a record of the wrong kind, ...
  const auto failure = libtorch_failure([&] {
    archive_->load_from(data, file.size());  // copies what it keeps: the mapping ends with this constructor
    archive_->read("meta", meta_value);
    if (archive_->try_read("checksums", sums_value) && sums_value.isString())
      checksums_ = parse_json(sums_value.toStringRef(), nullptr, /*allow_exceptions=*/false);
  });
  if (failure) throw CheckpointError(path.string() + ": not a trainer checkpoint or damaged (" + *failure + ")");
  if (!meta_value.isString()) throw CheckpointError(path.string() + ": not a trainer checkpoint (no metadata)");
  if (!damage.empty()) throw damaged(damaged_part(damage.front().what));
  json j;
  try {
    j = parse_json(meta_value.toStringRef());
    const int64_t version = j.at("format_version").get<int64_t>();
    if (version != kCheckpointFormatVersion)
      throw CheckpointError(path.string() + ": format version " + std::to_string(version) + ", this trainer reads " +
                            std::to_string(kCheckpointFormatVersion));
    MetaReader reader{j};
    meta_.visit(reader);
    // The input shape a model is built and checked for, bounded as a config's image sizes are.
    const ImageShape& in = meta_.input;
    const bool recorded = in.height != 0 || in.width != 0 || in.channels != 0;  // all 0: not recorded
    if (recorded && (in.height < 1 || in.width < 1 || in.height > kMostImageSide || in.width > kMostImageSide ||
                     in.channels < 1 || in.channels > 4))
      throw CheckpointError(path.string() + ": damaged metadata (an input of " + std::to_string(in.width) + "x" +
                            std::to_string(in.height) + "x" + std::to_string(in.channels) + ")");
    if (!j.contains("best"))  // written before train.best_metric existed: best_top1, -1 before any evaluation
      if (const double old = j.at("best_top1").get<double>(); old >= 0) meta_.best = old;
  } catch (const json::exception& e) {
    throw CheckpointError(path.string() + ": damaged metadata (" + std::string(e.what()) + ")");
  }
}

std::string LoadedCheckpoint::damaged_part(const std::string& record) const {
  // The weight whose bytes changed, when the file names its weights' checksums.
  if (checksums_.is_object()) {
    for (const char* section : {"model", "ema"}) {
      torch::serialize::InputArchive sub;
      if (!archive_->try_read(section, sub)) continue;
      if (const auto name = changed_tensor(sub, std::string(section) + "/", checksums_))
        return *name + " does not match its checksum";
    }
  }
  return record;
}

void LoadedCheckpoint::restore_model(torch::nn::Module& model) const {
  std::vector<std::string> problems;
  const auto failure = libtorch_failure([&] {
    torch::serialize::InputArchive sub;
    archive_->read("model", sub);
    torch::NoGradGuard no_grad;
    restore_module(sub, model, "", problems);
  });
  if (failure) problems.push_back(*failure);
  if (!problems.empty())
    throw CheckpointError(path_.string() +
                          ": model weights do not fit the model built from its config: " + problems.front() +
                          (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : ""));
}

void LoadedCheckpoint::restore_optimizer(torch::optim::Optimizer& optimizer) const {
  const auto failure = libtorch_failure([&] {
    torch::serialize::InputArchive sub;
    archive_->read("optimizer", sub);
    optimizer.load(sub);
  });
  if (failure)
    throw CheckpointError(path_.string() + ": optimizer state does not fit (" + *failure +
                          "); a checkpoint written before weight-decay groups existed resumes with --set "
                          "optim.decay_norm_and_bias=true");
}

void LoadedCheckpoint::restore_rng() const {
  const auto failure = libtorch_failure([&] {
    torch::Tensor state;
    archive_->read("rng_cpu", state, /*is_buffer=*/true);
    compat::set_cpu_rng_state(state);
    if (!torch::cuda::is_available()) return;
    for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(torch::cuda::device_count()); ++i)
      if (archive_->try_read("rng_cuda" + std::to_string(i), state, /*is_buffer=*/true))
        compat::set_cuda_rng_state(i, state);
  });
  if (failure) throw CheckpointError(path_.string() + ": generator state does not restore (" + *failure + ")");
}

std::optional<GeneratorRows> LoadedCheckpoint::rank_generators() const {
  GeneratorRows rows;
  bool found = false;
  const auto failure = libtorch_failure([&] {
    found = archive_->try_read("rng_ranks_cpu", rows.cpu, /*is_buffer=*/true);
    if (found && !archive_->try_read("rng_ranks_cuda", rows.cuda, /*is_buffer=*/true)) rows.cuda = torch::Tensor();
  });
  if (failure) throw CheckpointError(path_.string() + ": the ranks' generator states do not read (" + *failure + ")");
  if (!found) return std::nullopt;
  // Rows of bytes, one per rank, each a CPU generator's state (restore_rank_generators sets one of them).
  const auto is_rows = [](const torch::Tensor& t) { return t.dim() == 2 && t.scalar_type() == torch::kUInt8; };
  const bool fits = is_rows(rows.cpu) && rows.cpu.size(0) > 0 &&
                    rows.cpu.size(1) == compat::cpu_rng_state().numel() &&
                    (!rows.cuda.defined() || (is_rows(rows.cuda) && rows.cuda.size(0) == rows.cpu.size(0)));
  if (!fits)
    throw CheckpointError(path_.string() +
                          ": the ranks' generator states are not one row of state bytes per rank (damaged, or not a "
                          "trainer checkpoint)");
  return rows;
}

bool LoadedCheckpoint::restore_ema(torch::nn::Module& ema) const {
  std::vector<std::string> problems;
  bool found = false;
  const auto failure = libtorch_failure([&] {
    torch::serialize::InputArchive sub;
    found = archive_->try_read("ema", sub);
    torch::NoGradGuard no_grad;
    if (found) restore_module(sub, ema, "", problems);
  });
  if (failure) problems.push_back(*failure);
  if (!found && problems.empty()) return false;
  if (!problems.empty())
    throw CheckpointError(path_.string() + ": EMA weights do not fit the model: " + problems.front());
  return true;
}

}  // namespace trainer
