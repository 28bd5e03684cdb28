#include "trainer/io/weights.hpp"

#include <torch/torch.h>

#include <map>
#include <set>

#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

bool matches(const std::string& pattern, const std::string& name) { return glob_match(pattern, name); }

const std::string* matching_pattern(const std::vector<std::string>& patterns, const std::string& name) {
  for (const auto& p : patterns)
    if (matches(p, name)) return &p;
  return nullptr;
}

// "3 missing (a, b, c)", listing at most `shown` of them.
std::string summarize(const std::vector<std::string>& items, const std::string& what, size_t shown = 6) {
  std::vector<std::string> head(items.begin(),
                                items.begin() + static_cast<std::ptrdiff_t>(std::min(shown, items.size())));
  std::string s = std::to_string(items.size()) + " " + what + " (" + join(head);
  if (items.size() > shown) s += ", ... " + std::to_string(items.size() - shown) + " more";
  return s + ")";
}

std::string shape_text(const torch::Tensor& t) { return c10::str(t.sizes()); }

bool same_kind(const torch::Tensor& a, const torch::Tensor& b) {
  return a.is_floating_point() == b.is_floating_point() &&
         (a.scalar_type() == torch::kBool) == (b.scalar_type() == torch::kBool);
}

// PyTorch's state_dict order: a module's own parameters, then its own buffers, then each child's, depth first.
void append_state(const torch::nn::Module& module, const std::string& prefix, NamedTensors& state) {
  for (const auto& p : module.named_parameters(/*recurse=*/false)) state.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/false)) state.emplace_back(prefix + b.key(), b.value());
  for (const auto& child : module.named_children()) append_state(*child.value(), prefix + child.key() + ".", state);
}

}  // namespace

NamedTensors model_state(const torch::nn::Module& model) {
  NamedTensors state;
  append_state(model, "", state);
  return state;
}

WeightsReport load_weights(torch::nn::Module& model, const NamedTensors& tensors,
                           const std::vector<std::string>& exclude, const std::string& source) {
  std::map<std::string, const torch::Tensor*> file;
  for (const auto& [name, t] : tensors) file[name] = &t;
  WeightsReport report;
  std::vector<std::string> missing, unexpected, mismatched;
  std::vector<std::pair<torch::Tensor, const torch::Tensor*>> copies;
  std::set<std::string> in_model;
  std::set<std::string> used_patterns;

  for (auto& [name, target] : model_state(model)) {
    in_model.insert(name);
    if (const auto* p = matching_pattern(exclude, name)) {
      report.excluded.push_back(name);
      used_patterns.insert(*p);
      continue;
    }
    const auto it = file.find(name);
    if (it == file.end()) {
      // torchvision's published ResNet files predate this buffer; PyTorch leaves it at 0 as well.
      if (ends_with(name, ".num_batches_tracked")) report.defaulted.push_back(name);
      else missing.push_back(name);
      continue;
    }
    const torch::Tensor& saved = *it->second;
    if (saved.sizes() != target.sizes())
      mismatched.push_back(name + ": " + shape_text(saved) + " in the file, " + shape_text(target) + " in the model");
    else if (!same_kind(saved, target))
      mismatched.push_back(name + ": " + std::string(c10::toString(saved.scalar_type())) + " in the file, " +
                           std::string(c10::toString(target.scalar_type())) + " in the model");
    else {
      copies.emplace_back(target, &saved);
      report.loaded.push_back(name);
    }
  }
  for (const auto& [name, t] : file) {
    if (in_model.count(name)) continue;
    if (const auto* p = matching_pattern(exclude, name)) {
      report.ignored.push_back(name);
      used_patterns.insert(*p);
    } else {
      unexpected.push_back(name);
    }
  }
  for (const auto& p : exclude)
    if (!used_patterns.count(p)) report.unused_patterns.push_back(p);

  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::vector<std::string> parts;
    if (!mismatched.empty()) parts.push_back(summarize(mismatched, "mismatched", 3));
    if (!missing.empty()) parts.push_back(summarize(missing, "missing from the file"));
    if (!unexpected.empty()) parts.push_back(summarize(unexpected, "unexpected in the file"));
    throw WeightsError(source + " does not fit the model: " + join(parts, "; ") +
                       " (model.init_exclude skips keys by pattern, for example [\"fc.*\"] for a new head)");
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, saved] : copies) {
    target.copy_(*saved);  // converts the dtype, keeps the target's device and memory format
    report.values += target.numel();
  }
  return report;
}

std::string describe(const WeightsReport& r) {
  std::string s = "loaded " + std::to_string(r.loaded.size()) + " tensors (" + std::to_string(r.values) + " values)";
  if (!r.excluded.empty()) s += "; " + summarize(r.excluded, "excluded, kept as initialised");
  if (!r.ignored.empty()) s += "; " + summarize(r.ignored, "excluded from the file, not in the model");
  if (!r.defaulted.empty())
    s += "; " + std::to_string(r.defaulted.size()) + " num_batches_tracked not in the file, left at 0";
  if (!r.unused_patterns.empty()) s += "; init_exclude pattern(s) matching nothing: " + join(r.unused_patterns);
  return s;
}

}  // namespace trainer
