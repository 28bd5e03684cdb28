#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "support/fixtures.hpp"
#include "trainer/io/safetensors.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::TempDir;
namespace fs = std::filesystem;

// A file from parts: 8-byte little-endian length (or `claimed_length`), header text, data bytes.
void write_raw(const fs::path& path, const std::string& header, const std::string& data,
               std::optional<uint64_t> claimed_length = std::nullopt) {
  std::string bytes(8, '\0');
  const uint64_t n = claimed_length.value_or(header.size());
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  testing::write_text(path, bytes + header + data);
}

std::string read_error(const fs::path& path) {
  try {
    read_safetensors(path);
  } catch (const WeightsError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadataBitForBit) {
  TempDir dir;
  torch::manual_seed(1);
  const NamedTensors tensors{
      {"conv.weight", torch::randn({4, 3, 2, 2}).contiguous(torch::MemoryFormat::ChannelsLast)},
      {"half", torch::randn({5}).to(torch::kHalf)},
      {"bf16", torch::randn({2, 3}).to(torch::kBFloat16)},
      {"double", torch::randn({3}, torch::kDouble)},
      {"steps", torch::tensor(7, torch::kLong)},  // 0-dim, like num_batches_tracked
      {"i32", torch::tensor({-1, 2, 3}, torch::kInt)},
      {"i16", torch::tensor({-5, 6}, torch::kShort)},
      {"i8", torch::tensor({-7}, torch::kChar)},
      {"bytes", torch::tensor({0, 255}, torch::kByte)},
      {"mask", torch::tensor({true, false, true})},
      {"empty", torch::zeros({0, 3})},
  };
  const std::map<std::string, std::string> meta{{"arch", "resnet18"}, {"class_names", "[\"a\",\"b\"]"}};
  write_safetensors(dir / "w.safetensors", tensors, meta);
  const TensorFile f = read_safetensors(dir / "w.safetensors");
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  std::map<std::string, torch::Tensor> got(f.tensors.begin(), f.tensors.end());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got[name].scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got[name].sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(got[name], t)) << name;
    EXPECT_TRUE(got[name].is_contiguous()) << name;
  }
  for (size_t i = 1; i < f.tensors.size(); ++i) EXPECT_LT(f.tensors[i - 1].first, f.tensors[i].first);
}

// The bytes other readers see: length, header JSON with dtype/shape/offsets, row-major little-endian data.
TEST(Safetensors, WritesTheStandardLayout) {
  TempDir dir;
  const torch::Tensor t =
      torch::arange(6, torch::kFloat).reshape({1, 2, 3, 1}).contiguous(torch::MemoryFormat::ChannelsLast);
  write_safetensors(dir / "w.safetensors", {{"w", t}, {"b", torch::tensor({9.0f})}}, {{"format", "pt"}});
  const std::string bytes = testing::read_text(dir / "w.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);  // the data area starts 8-byte aligned
  const json header = json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"], json({{"format", "pt"}}));
  EXPECT_EQ(header["w"], json({{"dtype", "F32"}, {"shape", {1, 2, 3, 1}}, {"data_offsets", {0, 24}}}));
  EXPECT_EQ(header["b"], json({{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {24, 28}}}));
  ASSERT_EQ(bytes.size(), 8 + n + 28);
  float values[7];
  std::memcpy(values, bytes.data() + 8 + n, sizeof values);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], static_cast<float>(i));  // row-major despite channels_last
  EXPECT_EQ(values[6], 9.0f);
}

TEST(Safetensors, WriterRefusesWhatTheFormatCannotHold) {
  TempDir dir;
  EXPECT_THROW(write_safetensors(dir / "a", {{"z", torch::zeros({2}, torch::kComplexFloat)}}, {}), WeightsError);
  EXPECT_THROW(write_safetensors(dir / "b", {{"x", torch::zeros({1})}, {"x", torch::zeros({1})}}, {}), WeightsError);
  EXPECT_THROW(write_safetensors(dir / "c", {{"__metadata__", torch::zeros({1})}}, {}), WeightsError);
  EXPECT_FALSE(fs::exists(dir / "a"));
}

struct BadFile {
  const char* what;
  std::string header;
  std::string data;
  std::optional<uint64_t> claimed_length;
  const char* expected;  // part of the message, after the file name
};

class SafetensorsRejects : public ::testing::TestWithParam<BadFile> {};

TEST_P(SafetensorsRejects, WithAnErrorNamingFileAndTensor) {
  TempDir dir;
  const BadFile& bad = GetParam();
  write_raw(dir / "bad.safetensors", bad.header, bad.data, bad.claimed_length);
  const std::string message = read_error(dir / "bad.safetensors");
  EXPECT_NE(message.find("weights: " + (dir / "bad.safetensors").string() + ": "), std::string::npos) << message;
  EXPECT_NE(message.find(bad.expected), std::string::npos) << message;
}

const std::string k8Bytes(8, '\0');

INSTANTIATE_TEST_SUITE_P(
    Hardened, SafetensorsRejects,
    ::testing::Values(
        BadFile{"LengthPastEnd", "{}", "", 1000, "header length 1000 runs past the end of the file"},
        BadFile{"LengthOverLimit", "{}", "", uint64_t{1} << 40, "exceeds the limit"},
        BadFile{"NotJson", "{\"a\": ", "", std::nullopt, "header is not valid JSON"},
        BadFile{"NotObject", "[1, 2]", "", std::nullopt, "header is not a JSON object"},
        BadFile{"NumberOutOfRange", R"({"w":{"dtype":"F32","shape":[22e222222],"data_offsets":[0,8]}})", k8Bytes,
                std::nullopt, "header is not valid JSON ([json.exception.out_of_range.406]"},
        BadFile{"UnknownDtype", R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "ab", std::nullopt,
                "tensor \"w\": unsupported dtype \"F8_E4M3\""},
        BadFile{"NegativeShape", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", k8Bytes, std::nullopt,
                "tensor \"w\": shape [-2] holds a value that is not a size"},
        BadFile{"FractionalShape", R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", k8Bytes, std::nullopt,
                "not a size"},
        BadFile{"ShapeOverflow",
                R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
                k8Bytes, std::nullopt, "tensor \"w\": shape [4611686018427387904,4611686018427387904] overflows"},
        BadFile{"OffsetsPastData", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", k8Bytes, std::nullopt,
                "tensor \"w\": data_offsets [0,16] run past the data area (8 bytes)"},
        BadFile{"ReversedOffsets", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", k8Bytes, std::nullopt,
                "is not a range"},
        BadFile{"SpanNotShape", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8Bytes, std::nullopt,
                "tensor \"w\": data_offsets [0,8] span 8 bytes but shape [3] of F32 needs 3 x 4"},
        BadFile{
            "Overlap",
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            k8Bytes, std::nullopt, "tensors \"a\" and \"b\" overlap"},
        BadFile{
            "RepeatedName",
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            k8Bytes, std::nullopt, "tensor \"a\" appears twice"},
        BadFile{"MetadataNotText", R"({"__metadata__":{"epoch":3}})", "", std::nullopt,
                "__metadata__.epoch is not a string"},
        BadFile{"MissingOffsets", R"({"w":{"dtype":"F32","shape":[1]}})", k8Bytes, std::nullopt,
                "tensor \"w\": expected \"data_offsets\": [begin, end]"}),
    [](const auto& info) { return std::string(info.param.what); });

TEST(Safetensors, RejectsTooShortAndTruncatedFiles) {
  TempDir dir;
  testing::write_text(dir / "short.safetensors", "abc");
  EXPECT_NE(read_error(dir / "short.safetensors").find("3 bytes, too short for a safetensors header"),
            std::string::npos);
  EXPECT_NE(read_error(dir / "absent.safetensors").find("no such file"), std::string::npos);

  write_safetensors(dir / "w.safetensors", {{"a", torch::ones({64})}, {"b", torch::ones({64})}}, {});
  const std::string whole = testing::read_text(dir / "w.safetensors");
  testing::write_text(dir / "cut.safetensors", whole.substr(0, whole.size() - 10));
  EXPECT_NE(read_error(dir / "cut.safetensors").find("run past the data area"), std::string::npos);
}

}  // namespace
}  // namespace trainer
