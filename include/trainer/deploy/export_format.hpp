// The files `trainer export` writes and `trainer predict --model` runs: one row per format in export_formats()
// (safetensors, ONNX, TorchScript). A format turns an eval-mode model, its layer graph and its metadata into the
// file's bytes, and, when the file can run, opens such bytes as a Classifier again: export checks every file
// that way against the checkpoint's own logits before writing it, and predict --model runs it.
//   const ExportFormat f = format_for_output(args.format, args.output);
//   std::string bytes = f.serialize(request);   DeployedModel m = f.open(bytes, "model.onnx");
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/io/safetensors.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

using Metadata = std::map<std::string, std::string>;

constexpr int64_t kDefaultOnnxOpset = 17;  // what --opset 0 (not given) means

// What a format serializes. The tensors are handles to the model's own (no copy of their data).
struct ExportRequest {
  LayerGraph graph;         // the model's inference_graph()
  NamedTensors parameters;  // under their state-dict names: CPU, contiguous float32
  NamedTensors buffers;     // running statistics, num_batches_tracked
  Metadata metadata;        // text keys and values (lists and objects as JSON text)
  ImageShape input;         // C, H, W the model was trained on
  int64_t num_classes = 0;
  int64_t opset = 0;  // ONNX operator set (0: kDefaultOnnxOpset)
  int64_t batch = 0;  // fixed batch size (0: dynamic)
};

// An exported file opened for inference: its metadata and a Classifier whose forward runs the file (on the CPU).
struct DeployedModel {
  Metadata metadata;
  ClassifierPtr model;
};

struct ExportFormat {
  std::string name;                     // --format value
  std::vector<std::string> extensions;  // ".onnx": the format when --format is not given
  std::string metadata_where;           // where a deployer finds the metadata, for export's report
  bool needs_graph = false;             // writes the forward pass, not only the weights
  bool takes_opset_and_batch = false;   // --opset and --batch apply (ONNX)
  bool available = true;                // false: this build lacks what the format needs (serialize/open say what)
  bool runs_code = false;               // its files are programs that run as they are opened: predict asks for trust
  std::function<std::string(const ExportRequest&)> serialize;
  // Opens bytes this format wrote (`source` names them in errors); empty for a format that holds weights only.
  std::function<DeployedModel(const std::string& bytes, const std::string& source)> open;
};

const std::vector<ExportFormat>& export_formats();
std::vector<std::string> export_format_names();

// The format named `format`, or when that is empty the one `path`'s extension names; UsageError otherwise.
ExportFormat format_for_output(const std::string& format, const std::string& path);

// Each format's row, defined in its own file. ONNX needs a build with ONNX (libonnx) and OpenCV's DNN module:
// without them the row says so when used.
ExportFormat safetensors_format();
ExportFormat onnx_format();
ExportFormat torchscript_format();

}  // namespace trainer
