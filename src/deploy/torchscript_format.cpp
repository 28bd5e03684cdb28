// TorchScript: a torch::jit::Module built here rather than scripted. LibTorch's C++ frontend cannot script a
// C++ module, and tracing would need Python; but a jit::Module can hold submodules, parameters and buffers under
// any names and take methods defined from TorchScript source. So the file holds torchvision's module tree
// (conv1, layer1 -> "0" -> conv1, ...) with every parameter and buffer under its state-dict name, and a
// forward() written from the layer graph with the same ATen calls the C++ modules make (conv2d, batch_norm,
// max_pool2d, linear, ...). The same code builds it on LibTorch 1.13 and 2.x, the archive loads with
// torch.jit.load and torch::jit::load alone, and state_dict() loads into torchvision's model.
#include <torch/script.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <sstream>

#include "trainer/config/json_text.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/io/archive_check.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

const char* kMetadataFile = "metadata.json";

// "layer1.0.conv1" -> getattr(self.layer1, "0").conv1: TorchScript reaches a numbered child through getattr.
std::string attribute_path(const std::string& dotted) {
  std::string expr = "self";
  std::stringstream parts(dotted);
  for (std::string part; std::getline(parts, part, '.');)
    expr = is_identifier(part) ? expr + "." + part : "getattr(" + expr + ", \"" + part + "\")";
  return expr;
}

std::string script_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string script_pair(int64_t v) { return "[" + std::to_string(v) + ", " + std::to_string(v) + "]"; }

// Swin's shifted-window attention on the map [N, C, H, W] (layer_graph.hpp), the same steps as the ONNX writer's:
// lines that end by assigning the layer's output.
std::string window_attention_source(const Layer& l) {
  const std::string x = l.inputs[0], o = l.output, p = attribute_path(l.param);
  const int64_t win = l.window, n = win * win, heads = l.heads;
  const int64_t ph = l.height + (win - l.height % win) % win, pw = l.width + (win - l.width % win) % win;
  const int64_t windows = (ph / win) * (pw / win);
  auto num = [](int64_t v) { return std::to_string(v); };
  const std::string batch = x + ".size(0)", c = x + ".size(1)", d = x + ".size(1) // " + num(heads);
  std::string s;
  auto line = [&](const std::string& name, const std::string& expr) { s += "    " + name + " = " + expr + "\n"; };
  line(o + "_t", "torch.roll(torch.constant_pad_nd(" + x + ", [0, " + num(pw - l.width) + ", 0, " + num(ph - l.height) +
                     "], 0.0), [" + num(-l.shift_h) + ", " + num(-l.shift_w) + "], [2, 3])");
  line(o + "_t", o + "_t.reshape([" + batch + ", " + c + ", " + num(ph / win) + ", " + num(win) + ", " + num(pw / win) +
                     ", " + num(win) + "]).permute([0, 2, 4, 3, 5, 1]).reshape([" + batch + ", " + num(windows) + ", " +
                     num(n) + ", " + c + "])");
  line(o + "_qkv", "torch.linear(" + o + "_t, " + p + ".qkv.weight, " + attribute_path(l.param + "_qkv_bias") +
                       ").reshape([" + batch + ", " + num(windows) + ", " + num(n) + ", 3, " + num(heads) + ", " + d +
                       "]).permute([3, 0, 1, 4, 2, 5]).reshape([3, " + batch + ", " + num(windows * heads) + ", " +
                       num(n) + ", " + d + "])");
  std::string q = o + "_qkv[0]", k = o + "_qkv[1]";
  if (l.cosine) {
    auto unit = [](const std::string& t) { return "(" + t + " / " + t + ".norm(2, [-1], True).clamp_min(1e-12))"; };
    q = unit(q) + " * " + attribute_path(l.param + "_query_scale");
    k = unit(k);
  } else {
    q += " * float(" + d + ") ** -0.5";
  }
  line(o + "_w", "torch.softmax(torch.matmul(" + q + ", " + k + ".transpose(2, 3)) + " +
                     attribute_path(l.param + "_bias") + ", -1)");
  line(o + "_y", "torch.linear(torch.matmul(" + o + "_w, " + o + "_qkv[2]).reshape([" + batch + ", " + num(windows) +
                     ", " + num(heads) + ", " + num(n) + ", " + d + "]).permute([0, 1, 3, 2, 4]).reshape([" + batch +
                     ", " + num(windows) + ", " + num(n) + ", " + c + "]), " + p + ".proj.weight, " + p +
                     ".proj.bias)");
  line(o, "torch.roll(" + o + "_y.reshape([" + batch + ", " + num(ph / win) + ", " + num(pw / win) + ", " + num(win) +
              ", " + num(win) + ", " + c + "]).permute([0, 5, 1, 3, 2, 4]).reshape([" + batch + ", " + c + ", " +
              num(ph) + ", " + num(pw) + "]), [" + num(l.shift_h) + ", " + num(l.shift_w) +
              "], [2, 3])[:, :, :" + num(l.height) + ", :" + num(l.width) + "]");
  return s;
}

// forward() in TorchScript, one line per layer.
std::string forward_source(const LayerGraph& g) {
  std::string src = "def forward(self, " + g.input + ": Tensor) -> Tensor:\n";
  for (const Layer& l : g.layers) {
    const std::string x = l.inputs[0], p = attribute_path(l.param);
    std::string call;
    switch (l.kind) {
      case LayerKind::conv:
        call = "torch.conv2d(" + x + ", " + p + ".weight, " + (l.bias ? p + ".bias" : "None") + ", " +
               script_pair(l.stride) + ", " + script_pair(l.padding) + ", [1, 1], " + std::to_string(l.groups) + ")";
        break;
      case LayerKind::batch_norm:
        call = "torch.batch_norm(" + x + ", " + p + ".weight, " + p + ".bias, " + p + ".running_mean, " + p +
               ".running_var, False, 0.1, " + script_number(l.eps) + ", True)";
        break;
      case LayerKind::relu: call = "torch.relu(" + x + ")"; break;
      case LayerKind::max_pool:
        call = "torch.max_pool2d(" + x + ", " + script_pair(l.kernel) + ", " + script_pair(l.stride) + ", " +
               script_pair(l.padding) + ", [1, 1], False)";
        break;
      case LayerKind::add: call = "torch.add(" + x + ", " + l.inputs[1] + ")"; break;
      case LayerKind::global_avg_pool: call = "torch.mean(" + x + ", [2, 3])"; break;
      case LayerKind::flatten: call = "torch.flatten(" + x + ", 1)"; break;
      case LayerKind::linear: call = "torch.linear(" + x + ", " + p + ".weight, " + p + ".bias)"; break;
      case LayerKind::silu: call = "torch.silu(" + x + ")"; break;
      case LayerKind::sigmoid: call = "torch.sigmoid(" + x + ")"; break;
      case LayerKind::hardswish: call = "torch.hardswish(" + x + ")"; break;
      case LayerKind::hardsigmoid: call = "torch.hardsigmoid(" + x + ")"; break;
      case LayerKind::gelu: call = "torch.gelu(" + x + ")"; break;
      case LayerKind::mul: call = "torch.mul(" + x + ", " + l.inputs[1] + ")"; break;
      case LayerKind::squeeze: call = "torch.mean(" + x + ", [2, 3], True)"; break;
      case LayerKind::scale: call = "torch.mul(" + x + ", " + p + ")"; break;
      case LayerKind::layer_norm_2d:  // over the channels, as torchvision's LayerNorm2d: permute, normalise, back
        call = "torch.layer_norm(" + x + ".permute([0, 2, 3, 1]), [" + p + ".weight.size(0)], " + p + ".weight, " + p +
               ".bias, " + script_number(l.eps) + ", False).permute([0, 3, 1, 2])";
        break;
      case LayerKind::pixel_linear:
        call = "torch.linear(" + x + ".permute([0, 2, 3, 1]), " + p + ".weight, " + (l.bias ? p + ".bias" : "None") +
               ").permute([0, 3, 1, 2])";
        break;
      case LayerKind::window_attention: src += window_attention_source(l); break;
      case LayerKind::patch_merge: {
        const std::string padded = "torch.constant_pad_nd(" + x + ", [0, " + std::to_string(l.width % 2) + ", 0, " +
                                   std::to_string(l.height % 2) + "], 0.0)";
        const std::string h = std::to_string((l.height + 1) / 2), w = std::to_string((l.width + 1) / 2);
        call = padded + ".reshape([" + x + ".size(0), " + x + ".size(1), " + h + ", 2, " + w +
               ", 2]).permute([0, 5, 3, 1, 2, 4]).reshape([" + x + ".size(0), -1, " + h + ", " + w + "])";
        break;
      }
      case LayerKind::vit_embedding: {  // [N, D, gh, gw] -> [N, D, 1, 1 + gh*gw], the class token first
        // As the ONNX file does it: a zero column put first, plus the position embedding with the class token
        // added into its first row. (Concatenating a batch-sized expand of the class token instead made LibTorch
        // 2.6's TensorExpr fuser hang on the second call.)
        const std::string token = attribute_path(l.param + "class_token");
        const std::string pos = attribute_path(l.param + "encoder.pos_embedding");
        call = "torch.constant_pad_nd(" + x + ".flatten(2).unsqueeze(2), [1, 0], 0.0) + torch.cat([" + pos +
               ".slice(1, 0, 1) + " + token + ", " + pos + ".slice(1, 1)], 1).permute([0, 2, 1]).unsqueeze(2)";
        break;
      }
      case LayerKind::self_attention: {  // on [N, L, D], as nn.MultiheadAttention computes it, back to [N, D, 1, L]
        const std::string o = l.output, heads = std::to_string(l.heads);
        src += "    " + o + "_qkv = torch.linear(" + x + ".flatten(2).transpose(1, 2), " + p + ".in_proj_weight, " + p +
               ".in_proj_bias).reshape([" + x + ".size(0), " + x + ".size(3), 3, " + heads + ", " + x + ".size(1) // " +
               heads + "]).permute([2, 0, 3, 1, 4])\n";
        src += "    " + o + "_w = torch.softmax(torch.matmul(" + o + "_qkv[0] * float(" + x + ".size(1) // " + heads +
               ") ** -0.5, " + o + "_qkv[1].transpose(2, 3)), -1)\n";
        call = "torch.linear(torch.matmul(" + o + "_w, " + o + "_qkv[2]).transpose(1, 2).flatten(2), " + p +
               ".out_proj.weight, " + p + ".out_proj.bias).transpose(1, 2).unsqueeze(2)";
        break;
      }
      case LayerKind::first_token: call = x + ".select(3, 0).select(2, 0)"; break;
    }
    if (!call.empty()) src += "    " + l.output + " = " + call + "\n";
  }
  return src + "    return " + g.output + "\n";
}

// The class name of the module at `prefix`, from the layer that uses its parameters (Conv2d, BatchNorm2d, Linear).
std::string module_type(const LayerGraph& g, const std::string& prefix) {
  for (const Layer& l : g.layers)
    if (l.param == prefix) {
      if (l.kind == LayerKind::conv) return "Conv2d";
      if (l.kind == LayerKind::batch_norm) return "BatchNorm2d";
      if (l.kind == LayerKind::linear || l.kind == LayerKind::pixel_linear) return "Linear";
      if (l.kind == LayerKind::layer_norm_2d) return "LayerNorm";
    }
  return "Module";
}

class ModuleTree {
 public:
  ModuleTree(const LayerGraph& graph, const std::string& root_type)
      : graph_(graph), cu_(std::make_shared<torch::jit::CompilationUnit>()), root_(make(root_type)) {}

  void add(const std::string& name, const torch::Tensor& value, bool buffer) {
    const size_t dot = name.rfind('.');
    torch::jit::Module owner = dot == std::string::npos ? root_ : module_at(name.substr(0, dot));
    const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    owner.register_parameter(leaf, value, buffer);
  }

  // A tensor attribute outside the state dict (the graph's constants), so state_dict() stays torchvision's.
  void add_constant(const std::string& name, const torch::Tensor& value) {
    const size_t dot = name.rfind('.');
    torch::jit::Module owner = dot == std::string::npos ? root_ : module_at(name.substr(0, dot));
    owner.register_attribute(dot == std::string::npos ? name : name.substr(dot + 1), c10::TensorType::get(), value);
  }

  torch::jit::Module finish() {
    root_.define(forward_source(graph_));
    root_.eval();
    return root_;
  }

 private:
  torch::jit::Module make(const std::string& type) {
    return torch::jit::Module(c10::QualifiedName("__torch__.trainer." + type), cu_, /*shouldMangle=*/true);
  }

  // The submodule at `prefix`, made and registered in its parent on first use: parameters arrive in model order,
  // so the children keep the model's order (a parent refers to its child's type, which may still grow).
  torch::jit::Module module_at(const std::string& prefix) {
    if (auto it = modules_.find(prefix); it != modules_.end()) return it->second;
    const size_t dot = prefix.rfind('.');
    torch::jit::Module parent = dot == std::string::npos ? root_ : module_at(prefix.substr(0, dot));
    torch::jit::Module m = make(module_type(graph_, prefix));
    parent.register_module(dot == std::string::npos ? prefix : prefix.substr(dot + 1), m);
    modules_.emplace(prefix, m);
    return m;
  }

  const LayerGraph& graph_;
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  torch::jit::Module root_;
  std::map<std::string, torch::jit::Module> modules_;
};

class TorchScriptClassifier final : public Classifier {
 public:
  explicit TorchScriptClassifier(torch::jit::Module module) : module_(std::move(module)) { module_.eval(); }
  torch::Tensor forward(torch::Tensor images) override {
    torch::NoGradGuard no_grad;
    return module_.forward({images}).toTensor();
  }

 private:
  torch::jit::Module module_;
};

std::string torchscript_serialize(const ExportRequest& r) {
  std::string root_type = r.metadata.count("arch") ? r.metadata.at("arch") : "Classifier";
  if (!is_identifier(root_type)) root_type = "Classifier";
  ModuleTree tree(r.graph, root_type);
  for (const auto& [name, value] : r.parameters) tree.add(name, value, /*buffer=*/false);
  for (const auto& [name, value] : r.buffers) tree.add(name, value, /*buffer=*/true);
  for (const auto& [name, value] : r.graph.constants) tree.add_constant(name, value);
  torch::jit::Module module = tree.finish();
  torch::jit::ExtraFilesMap extra{{kMetadataFile, nlohmann::json(r.metadata).dump(1)}};
  std::ostringstream out;
  module.save(out, extra);
  return out.str();
}

DeployedModel torchscript_open(const std::string& bytes, const std::string& source) {
  // Every record against its CRC-32 and every pickle walked before LibTorch reads any of it: LibTorch checks
  // neither, and takes a tensor's sizes, strides and offset from the pickle as written.
  if (const auto damaged = first_damaged_record(bytes.data(), bytes.size()))
    throw ExportError(source + ": not a TorchScript archive, or damaged (" + *damaged + ")");
  if (const auto problem = archive_pickle_problem(bytes.data(), bytes.size()))
    throw ExportError(source + ": not a TorchScript archive of a model, or damaged (" + *problem + ")");
  torch::jit::ExtraFilesMap extra{{kMetadataFile, ""}};
  torch::jit::Module module;
  try {
    std::istringstream in(bytes);
    module = torch::jit::load(in, torch::Device(torch::kCPU), extra);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw ExportError(source + ": not a TorchScript archive LibTorch can load (" + what.substr(0, what.find('\n')) +
                      ")");
  }
  DeployedModel m;
  if (!extra[kMetadataFile].empty()) {
    const auto j = parse_json(extra[kMetadataFile], nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw ExportError(source + ": " + kMetadataFile + " is not a JSON object");
    for (const auto& [key, value] : j.items())
      m.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  m.model = std::make_shared<TorchScriptClassifier>(std::move(module));
  return m;
}

}  // namespace

ExportFormat torchscript_format() {
  ExportFormat f;
  f.name = "torchscript";
  f.runs_code = true;  // LibTorch compiles and runs the file's code (its __setstate__ as it loads)
  f.extensions = {".pt", ".ts", ".torchscript"};
  f.metadata_where = std::string("the archive's extra file ") + kMetadataFile + " (torch.jit.load(f, _extra_files={\"" +
                     kMetadataFile + "\": \"\"}))";
  f.needs_graph = true;
  f.serialize = torchscript_serialize;
  f.open = torchscript_open;
  return f;
}

}  // namespace trainer
