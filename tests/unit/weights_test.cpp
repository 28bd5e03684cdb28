#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/fixtures.hpp"
#include "trainer/io/torch_state_dict.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::TempDir;

ClassifierPtr small_resnet(int64_t classes, uint64_t seed) {
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.in_channels = 3;
  m.num_classes = classes;
  m.stem = StemKind::small;
  torch::manual_seed(seed);
  return build_model(m, {32, 32, 3});
}

std::map<std::string, torch::Tensor> as_map(const NamedTensors& t) { return {t.begin(), t.end()}; }

// Gives BatchNorm statistics values a fresh model lacks, so a test notices if buffers are not copied.
void perturb_buffers(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& b : model.buffers())
    if (b.is_floating_point()) b.uniform_(0.5, 1.5);
    else b.fill_(42);
}

std::string load_error(torch::nn::Module& model, const NamedTensors& t, const std::vector<std::string>& exclude = {}) {
  try {
    load_weights(model, t, exclude, "w.safetensors");
  } catch (const WeightsError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Weights, StateHasEveryParameterAndBufferUnderItsDottedName) {
  const auto model = small_resnet(10, 0);
  const auto state = as_map(model_state(*model));
  EXPECT_EQ(state.size(), 122u);  // torchvision resnet18's state_dict has 122 entries
  EXPECT_TRUE(state.count("layer3.0.downsample.1.running_mean"));
  EXPECT_TRUE(state.count("bn1.num_batches_tracked"));
  EXPECT_TRUE(state.count("fc.bias"));
}

TEST(Weights, RoundTripThroughSafetensorsRestoresEveryTensorExactly) {
  TempDir dir;
  const auto source = small_resnet(10, 1);
  perturb_buffers(*source);
  write_safetensors(dir / "w.safetensors", model_state(*source), {});
  const auto target = small_resnet(10, 2);
  place_model(*target, torch::kCPU, /*channels_last=*/true);
  const WeightsReport r = load_weights(*target, read_safetensors(dir / "w.safetensors").tensors, {}, "w.safetensors");
  EXPECT_EQ(r.loaded.size(), 122u);
  EXPECT_TRUE(r.excluded.empty());
  const auto want = as_map(model_state(*source));
  for (const auto& [name, t] : model_state(*target)) EXPECT_TRUE(torch::equal(t, want.at(name))) << name;
  // Loading keeps the model's memory format; exporting it writes row-major bytes again.
  EXPECT_TRUE(target->named_parameters()["conv1.weight"].is_contiguous(torch::MemoryFormat::ChannelsLast));
  write_safetensors(dir / "again.safetensors", model_state(*target), {});
  EXPECT_EQ(testing::read_text(dir / "again.safetensors"), testing::read_text(dir / "w.safetensors"));
}

TEST(Weights, StrictByDefaultListingMismatchedKeysAndLeavingTheModelUnchanged) {
  const auto source = small_resnet(1000, 1);
  const auto target = small_resnet(10, 2);
  const torch::Tensor before = target->named_parameters()["conv1.weight"].clone();
  const std::string message = load_error(*target, model_state(*source));
  EXPECT_NE(message.find("weights: w.safetensors does not fit the model: 2 mismatched (fc.weight: [1000, 512] in the "
                         "file, [10, 512] in the model, fc.bias: [1000] in the file, [10] in the model)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("model.init_exclude"), std::string::npos);
  EXPECT_TRUE(torch::equal(target->named_parameters()["conv1.weight"], before));
}

TEST(Weights, ExcludedKeysKeepTheirFreshValues) {
  const auto source = small_resnet(1000, 1);
  const auto target = small_resnet(10, 2);
  const torch::Tensor fresh_fc = target->named_parameters()["fc.weight"].clone();
  const WeightsReport r = load_weights(*target, model_state(*source), {"fc.*", "head.*"}, "w.safetensors");
  EXPECT_EQ(r.excluded, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(r.loaded.size(), 120u);
  EXPECT_EQ(r.unused_patterns, (std::vector<std::string>{"head.*"}));
  EXPECT_TRUE(torch::equal(target->named_parameters()["fc.weight"], fresh_fc));
  EXPECT_TRUE(torch::equal(target->named_parameters()["layer4.1.conv2.weight"],
                           source->named_parameters()["layer4.1.conv2.weight"]));
  const std::string text = describe(r);
  EXPECT_NE(text.find("loaded 120 tensors"), std::string::npos) << text;
  EXPECT_NE(text.find("2 excluded, kept as initialised (fc.weight, fc.bias)"), std::string::npos) << text;
  EXPECT_NE(text.find("matching nothing: head.*"), std::string::npos) << text;
}

TEST(Weights, ReportsMissingAndUnexpectedKeys) {
  const auto model = small_resnet(10, 1);
  NamedTensors t;
  for (auto& item : model_state(*model))
    if (item.first != "layer1.0.conv1.weight") t.push_back(item);
  t.emplace_back("extra.weight", torch::zeros({3}));
  const std::string message = load_error(*model, t);
  EXPECT_NE(message.find("1 missing from the file (layer1.0.conv1.weight)"), std::string::npos) << message;
  EXPECT_NE(message.find("1 unexpected in the file (extra.weight)"), std::string::npos) << message;
  // An excluded pattern covers keys on both sides.
  EXPECT_NO_THROW(load_weights(*model, t, {"layer1.0.conv1.*", "extra.*"}, "w.safetensors"));
}

// torchvision's published ResNet weights predate num_batches_tracked; they load, as in PyTorch.
TEST(Weights, FilesWithoutNumBatchesTrackedLoad) {
  const auto source = small_resnet(10, 1);
  NamedTensors t;
  for (auto& item : model_state(*source))
    if (item.first.find("num_batches_tracked") == std::string::npos) t.push_back(item);
  const auto target = small_resnet(10, 2);
  const WeightsReport r = load_weights(*target, t, {}, "w.safetensors");
  EXPECT_EQ(r.defaulted.size(), 20u);  // one per BatchNorm
  EXPECT_EQ(r.loaded.size(), 102u);
}

TEST(Weights, ConvertsFloatPrecisionButNotKind) {
  const auto source = small_resnet(10, 1);
  NamedTensors half;
  for (auto& [name, t] : model_state(*source)) half.emplace_back(name, t.is_floating_point() ? t.to(torch::kHalf) : t);
  const auto target = small_resnet(10, 2);
  load_weights(*target, half, {}, "w.safetensors");
  const auto w = target->named_parameters()["fc.weight"];
  EXPECT_EQ(w.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(w, source->named_parameters()["fc.weight"].to(torch::kHalf).to(torch::kFloat)));

  NamedTensors wrong = model_state(*source);
  for (auto& item : wrong)
    if (item.first == "fc.bias") item.second = torch::zeros({10}, torch::kLong);
  EXPECT_NE(load_error(*target, wrong).find("fc.bias: Long in the file, Float in the model"), std::string::npos);
}

}  // namespace
}  // namespace trainer

namespace trainer {
namespace {

// torch.save's zip around a hand-written data.pkl: {"w": _rebuild_tensor_v2(storage '0' of `numel` floats,
// offset 0, sizes, strides, False, OrderedDict())}, the storage record holding `floats` floats.
std::string pickle_text(const std::string& s) {
  std::string out = "X";
  for (int b = 0; b < 4; ++b) out += static_cast<char>((s.size() >> (8 * b)) & 0xff);
  return out + s;
}
std::string pickle_long(int64_t v) {  // LONG1, eight bytes
  std::string out = "\x8a\x08";
  for (int b = 0; b < 8; ++b) out += static_cast<char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xff);
  return out;
}
std::filesystem::path hostile_pth(const std::filesystem::path& path, int64_t numel, size_t floats,
                                  const std::string& sizes, const std::string& strides) {
  const std::string pickle = "\x80\x02}" + pickle_text("w") + "ctorch._utils\n_rebuild_tensor_v2\n(" + "(" +
                             pickle_text("storage") + "ctorch\nFloatStorage\n" + pickle_text("0") + pickle_text("cpu") +
                             pickle_long(numel) + "tQ" + pickle_long(0) + "(" + sizes + "t(" + strides + "t\x89" +
                             "ccollections\nOrderedDict\n)RtRs.";
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  const std::vector<float> storage(floats, 1.0f);
  writer.writeRecord("data/0", storage.data(), storage.size() * sizeof(float));
  writer.writeEndOfFile();
  testing::write_text(path, bytes);
  return path;
}

std::string state_dict_error(const std::filesystem::path& path) {
  try {
    read_torch_state_dict(path);
  } catch (const WeightsError& e) {
    return e.what();
  }
  return "no error";
}

// The .pth reader is held to the safetensors reader's strictness: sizes whose products wrap around 64 bits, an
// element count far beyond its record (refused before anything is allocated) and sizes that are not integers are
// one-line errors naming the file. The well-formed file reads.
TEST(TorchStateDict, HostileSizesAreRefusedBeforeAnyAllocation) {
  testing::TempDir dir;
  const std::string two = pickle_long(2), zero = pickle_long(0), one = pickle_long(1);
  const auto good = read_torch_state_dict(hostile_pth(dir / "good.pth", 4, 4, two + two, two + one));
  ASSERT_EQ(good.size(), 1u);
  EXPECT_TRUE(torch::equal(good[0].second, torch::ones({2, 2})));
  const std::string file = (dir / "h.pth").string();
  // 2^32 x 2^32 elements of stride 0: 2^64, which wrapped to 0 and passed, then was made contiguous (64 EiB).
  const std::string huge = pickle_long(int64_t{1} << 32);
  EXPECT_EQ(state_dict_error(hostile_pth(file, 4, 4, huge + huge, zero + zero)),
            "weights: " + file + ": a tensor reaches past the end of its storage (damaged file)");
  // Sizes 2^62 and 4 with strides 1 and 2^62: the last element at 2^62 - 1 + 3 x 2^62, past int64_t.
  const std::string big = pickle_long(int64_t{1} << 62);
  EXPECT_EQ(state_dict_error(hostile_pth(file, 4, 4, big + pickle_long(4), one + big)),
            "weights: " + file + ": a tensor reaches past the end of its storage (damaged file)");
  // 2^40 floats claimed by a 16-byte record: a 4 TiB tensor was allocated before the sizes were compared.
  EXPECT_EQ(state_dict_error(hostile_pth(file, int64_t{1} << 40, 4, two + two, two + one)),
            "weights: " + file +
                ": storage data/0 holds 16 bytes, not the 1099511627776 x 4 bytes of elements its "
                "tensors need (damaged file)");
  // A size that is text, read as 0 until now.
  EXPECT_EQ(state_dict_error(hostile_pth(file, 4, 4, pickle_text("2") + two, two + one)),
            "weights: " + file +
                ": a tensor size or stride that is not a whole number >= 0 in data.pkl, which a "
                "state dict does not hold");
}

// LibTorch's zip reader allocates a record's declared size before reading it: the declared sizes are checked
// against the stored bytes first, so a few bytes of directory cannot ask for a gigabyte.
TEST(TorchStateDict, ARecordDeclaringMoreThanItStoresIsRefused) {
  testing::TempDir dir;
  const std::string two = pickle_long(2), one = pickle_long(1);
  const auto path = hostile_pth(dir / "h.pth", 4, 4, two + two, two + one);
  std::string bytes = testing::read_text(path);
  // The central directory entry of data/0 (16 bytes stored): its uncompressed size (offset 24) made 1 GiB.
  size_t at = 0;
  while ((at = bytes.find(std::string("PK\x01\x02", 4), at)) != std::string::npos) {
    const size_t name_length = static_cast<uint8_t>(bytes[at + 28]) | static_cast<uint8_t>(bytes[at + 29]) << 8;
    if (bytes.compare(at + 46 + name_length - 6, 6, "data/0") == 0) break;
    at += 4;
  }
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 24, 4, std::string("\x00\x00\x00\x40", 4));
  testing::write_text(path, bytes);
  EXPECT_EQ(state_dict_error(path), "weights: " + path.string() +
                                        ": truncated or damaged (record archive/data/0 declares 1073741824 bytes but "
                                        "stores 16)");
}

}  // namespace
}  // namespace trainer
