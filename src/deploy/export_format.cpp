#include "trainer/deploy/export_format.hpp"

#include <filesystem>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

ExportFormat safetensors_format() {
  ExportFormat f;
  f.name = "safetensors";
  f.extensions = {".safetensors"};
  f.metadata_where = "the header's __metadata__ (safetensors.safe_open(...).metadata())";
  f.serialize = [](const ExportRequest& r) {
    Metadata metadata = r.metadata;
    metadata["format"] = "pt";  // what Hugging Face loaders expect of PyTorch weights
    NamedTensors state = r.parameters;
    state.insert(state.end(), r.buffers.begin(), r.buffers.end());
    return safetensors_bytes(state, metadata, "safetensors export");
  };
  return f;
}

const std::vector<ExportFormat>& export_formats() {
  static const std::vector<ExportFormat> formats{safetensors_format(), onnx_format(), torchscript_format()};
  return formats;
}

std::vector<std::string> export_format_names() {
  std::vector<std::string> names;
  for (const auto& f : export_formats()) names.push_back(f.name);
  return names;
}

ExportFormat format_for_output(const std::string& format, const std::string& path) {
  if (!format.empty()) {
    for (const auto& f : export_formats())
      if (f.name == format) return f;
    const std::string guess = closest_match(format, export_format_names());
    throw UsageError("--format: unknown format \"" + format + "\"" +
                     (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                     " (valid: " + join(export_format_names()) + ")");
  }
  const std::string extension = std::filesystem::path(path).extension().string();
  for (const auto& f : export_formats())
    for (const auto& e : f.extensions)
      if (e == extension) return f;
  std::vector<std::string> known;
  for (const auto& f : export_formats())
    for (const auto& e : f.extensions) known.push_back(e + " (" + f.name + ")");
  throw UsageError(path + ": cannot tell the format from the extension \"" + extension + "\"; give --format (" +
                   join(export_format_names()) + ") or one of " + join(known));
}

}  // namespace trainer
