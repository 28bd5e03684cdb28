// The augmentation ops give torchvision's pixels: each op of the automatic policies (_apply_op) at several
// magnitudes, with each interpolation and fill, and ColorJitter's adjust_* functions, equal torchvision on the same
// PIL image byte for byte, in RGB and grey, on a non-square and a square image (rotations by 90 degrees take
// Pillow's transpose there). The policies' magnitude tables equal torchvision's _augmentation_space. Needs
// Debian's python3-torchvision; skipped with a message when it is absent.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "e2e/torchvision_reference.hpp"
#include "trainer/data/pixels/augment_ops.hpp"
#include "trainer/data/pixels/auto_augment.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/pil_color.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;

nlohmann::json cases(int channels) {
  nlohmann::json out = nlohmann::json::array();
  const nlohmann::json fill = channels == 3 ? nlohmann::json{12, 200, 7} : nlohmann::json{77};
  const std::vector<std::pair<std::string, std::vector<double>>> geometric = {
      {"ShearX", {0.3, -0.17, 0.99}},
      {"ShearY", {0.29, -0.5}},
      {"TranslateX", {12.7, -30}},
      {"TranslateY", {5, -17.9}},
      {"Rotate", {30, -12.3, 90, -90, 135, 180, 4.5}}};
  for (const std::string interpolation : {"nearest", "bilinear", "bicubic"})
    for (const auto& [op, magnitudes] : geometric)
      for (double m : magnitudes)
        out.push_back({{"op", op},
                       {"magnitude", m},
                       {"interpolation", interpolation},
                       {"fill", interpolation == "nearest" ? nlohmann::json() : fill}});
  const std::vector<std::pair<std::string, std::vector<double>>> tone = {{"Brightness", {0.5, -0.9, 0.33}},
                                                                         {"Color", {0.6, -0.9, 0.99}},
                                                                         {"Contrast", {0.4, -0.5, 0.99, -0.99}},
                                                                         {"Sharpness", {0.9, -0.9, 0.3}},
                                                                         {"Posterize", {1, 4, 7, 8}},
                                                                         {"Solarize", {255, 127.5, 8.5, 0}},
                                                                         {"AutoContrast", {0}},
                                                                         {"Equalize", {0}},
                                                                         {"Invert", {0}},
                                                                         {"Identity", {0}},
                                                                         {"hue", {0.1, -0.3, 0.5, -0.5, 0.02}},
                                                                         {"brightness", {1.3, 0.6}},
                                                                         {"contrast", {0.7, 1.8}},
                                                                         {"saturation", {1.4, 0.2}}};
  for (const auto& [op, magnitudes] : tone)
    for (double m : magnitudes) out.push_back({{"op", op}, {"magnitude", m}});
  return out;
}

void apply_case(const nlohmann::json& c, cv::Mat& image) {
  static const std::map<std::string, AugmentOp> ops = [] {
    std::map<std::string, AugmentOp> m;
    for (size_t i = 0; i < kAugmentOpCount; ++i) m[op_name(static_cast<AugmentOp>(i))] = static_cast<AugmentOp>(i);
    return m;
  }();
  const std::string op = c.at("op");
  const double m = c.at("magnitude");
  if (op == "hue") return pil_adjust_hue(image, m);
  if (op == "brightness") return pil_brightness(image, static_cast<float>(m));
  if (op == "contrast") return pil_contrast(image, static_cast<float>(m));
  if (op == "saturation") return pil_color(image, static_cast<float>(m));
  OpSettings s;
  const std::string interpolation = c.value("interpolation", "nearest");
  s.interpolation = interpolation == "nearest"    ? Interpolation::nearest
                    : interpolation == "bilinear" ? Interpolation::bilinear
                                                  : Interpolation::bicubic;
  if (c.contains("fill") && !c["fill"].is_null())
    for (size_t k = 0; k < 3; ++k)
      s.fill[k] = static_cast<uint8_t>(c["fill"][std::min(k, c["fill"].size() - 1)].get<int>());
  apply_op(image, ops.at(op), m, s);
}

struct Shape {
  int rows, cols, channels;
};

class AugmentParity : public ::testing::TestWithParam<Shape> {};

TEST_P(AugmentParity, OpsEqualTorchvisionOnPilImagesByteForByte) {
  if (!torchvision_available())
    GTEST_SKIP() << "Python torchvision not found at " TRAINER_PYTHON
                 << "; install python3-torchvision (scripts/setup.sh does) to compare with its augmentation ops";
  const Shape shape = GetParam();
  TempDir dir;
  const std::filesystem::path image_path = dir / "image.png";
  ASSERT_TRUE(cv::imwrite(image_path.string(), parity_image(shape.rows, shape.cols, shape.channels)));
  const auto bytes = read_file_bytes(image_path);
  cv::Mat decoded = decode_image(bytes, probe_image(bytes), shape.channels, 1, image_path);
  if (shape.channels == 3) cv::cvtColor(decoded, decoded, cv::COLOR_BGR2RGB);  // the ops see RGB, as PIL does
  const nlohmann::json all = cases(shape.channels);
  // Every op is compared: one added to AugmentOp without cases here fails this test.
  for (size_t i = 0; i < kAugmentOpCount; ++i) {
    const std::string name = op_name(static_cast<AugmentOp>(i));
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const nlohmann::json& c) { return c.at("op") == name; }))
        << name << " has no parity case";
  }
  write_text(dir / "cases.json", all.dump());
  const auto python =
      run_command(std::string(TRAINER_PYTHON) + " " TRAINER_SOURCE_DIR "/tests/interop/pil_augment.py " +
                  image_path.string() + " " + (dir / "cases.json").string() + " " + dir.path().string());
  ASSERT_EQ(python.exit_code, 0) << python.output;
  for (size_t i = 0; i < all.size(); ++i) {
    cv::Mat out = decoded.clone();
    apply_case(all[i], out);
    const auto expected = read_file_bytes(dir / ("case_" + std::to_string(i) + ".raw"));
    ASSERT_EQ(expected.size(), out.total() * out.elemSize()) << all[i].dump();
    const ByteDiff d = byte_diff(expected, out);
    EXPECT_EQ(d.differing, 0u) << all[i].dump() << ": " << d.differing << " of " << expected.size()
                               << " bytes differ, by up to " << d.worst;
  }
}

INSTANTIATE_TEST_SUITE_P(Images, AugmentParity,
                         ::testing::Values(Shape{157, 211, 3}, Shape{157, 211, 1}, Shape{64, 64, 3}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols) +
                                  (info.param.channels == 3 ? "_rgb" : "_grey");
                         });

TEST(AugmentParity, MagnitudeTablesEqualTorchvisions) {
  if (!torchvision_available()) GTEST_SKIP() << "Python torchvision not found at " TRAINER_PYTHON;
  TempDir dir;
  const std::filesystem::path image_path = dir / "image.png";
  ASSERT_TRUE(cv::imwrite(image_path.string(), parity_image(8, 8, 1)));
  struct Space {
    std::string name;  // the policy's name in tests/interop/pil_augment.py
    AutoAugmentKind kind;
    int64_t bins;
  };
  const std::vector<Space> spaces = {{"autoaugment", AutoAugmentKind::imagenet, 10},
                                     {"randaugment", AutoAugmentKind::randaugment, 31},
                                     {"randaugment", AutoAugmentKind::randaugment, 11},
                                     {"trivialaugment_wide", AutoAugmentKind::trivialaugment_wide, 31},
                                     {"augmix", AutoAugmentKind::augmix, 10}};
  // Every policy with an op table is compared.
  for (const auto& row : policy_rows())
    EXPECT_TRUE(!row.space ||
                std::any_of(spaces.begin(), spaces.end(), [&](const Space& s) { return s.kind == row.kind; }))
        << enum_name(auto_augment_kinds(), row.kind) << " has no magnitude-table case";
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : spaces) list.push_back({{"space", s.name}, {"bins", s.bins}, {"height", 176}, {"width", 233}});
  write_text(dir / "cases.json", list.dump());
  const auto python =
      run_command(std::string(TRAINER_PYTHON) + " " TRAINER_SOURCE_DIR "/tests/interop/pil_augment.py " +
                  image_path.string() + " " + (dir / "cases.json").string() + " " + dir.path().string());
  ASSERT_EQ(python.exit_code, 0) << python.output;
  for (size_t i = 0; i < spaces.size(); ++i) {
    // Key order is torchvision's dict order, which its policies index into.
    const auto out = nlohmann::ordered_json::parse(read_text(dir / ("case_" + std::to_string(i) + ".json")));
    const auto& expected = out.at("space");
    // LibTorch 1.13's CPU linspace (Debian 12's, the reference here) is matched bit for bit. Other builds round
    // a few values differently (2.6: TrivialAugmentWide's TranslateX bin 15 is 15.999999 instead of 16): there
    // the values must agree within one float step.
    const bool exact = out.at("torch").get<std::string>().rfind("1.13", 0) == 0;
    const auto ours = augmentation_space(spaces[i].kind, spaces[i].bins, 176, 233);
    std::vector<std::string> names, their_names;
    for (const auto& op : ours) names.push_back(op_name(op.op));
    for (const auto& item : expected.items()) their_names.push_back(item.key());
    EXPECT_EQ(names, their_names) << spaces[i].name;
    for (const auto& op : ours) {
      const auto theirs = expected.at(op_name(op.op)).get<std::vector<double>>();
      if (exact) {
        EXPECT_EQ(op.magnitudes, theirs) << spaces[i].name << " " << op_name(op.op);
        continue;
      }
      ASSERT_EQ(op.magnitudes.size(), theirs.size()) << spaces[i].name << " " << op_name(op.op);
      for (size_t k = 0; k < theirs.size(); ++k) {
        const auto a = static_cast<float>(op.magnitudes[k]), b = static_cast<float>(theirs[k]);
        EXPECT_TRUE(a == b || std::nextafter(a, b) == b) << spaces[i].name << " " << op_name(op.op) << " " << k;
      }
    }
  }
}

}  // namespace
}  // namespace trainer
