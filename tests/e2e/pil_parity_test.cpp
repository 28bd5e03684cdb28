// The image transforms give torchvision's pixels: for the same crop and flip (train) or the same resize and
// center crop (eval), render() of a decoded image equals torchvision.transforms.functional on the PIL image,
// byte for byte, with the bilinear and bicubic filters, in RGB and grayscale. From a JPEG, the trainer's path
// (render_sample: only the region the render reads is decoded) equals PIL decoding the whole file. Needs Debian's
// python3-torchvision (scripts/setup.sh installs it); skipped with a message when it is absent.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "e2e/torchvision_reference.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/sample_pixels.hpp"
#include "trainer/data/pixels/transform.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;

struct Case {
  nlohmann::json json;
  TransformSpec spec;
  SamplePlan plan;
};

std::vector<Case> cases(int64_t rows, int64_t cols) {
  std::vector<Case> out;
  for (const std::string filter : {"bilinear", "bicubic"}) {
    const Interpolation interpolation = filter == "bilinear" ? Interpolation::bilinear : Interpolation::bicubic;
    // Train: a whole-image shrink by 3.3x, a flipped fractional shrink, an enlargement, a crop at output size.
    const std::vector<std::array<int64_t, 5>> boxes = {
        {0, 0, cols, rows, 0}, {13, 7, 100, 80, 1}, {50, 40, 30, 20, 1}, {20, 30, 64, 64, 0}};
    for (const auto& [left, top, width, height, flip] : boxes) {
      Case c;
      c.spec.size = 64;
      c.spec.interpolation = interpolation;
      c.plan = {{static_cast<double>(left), static_cast<double>(top), static_cast<double>(width),
                 static_cast<double>(height)},
                flip != 0,
                {}};
      c.json = {{"kind", "train"},  {"left", left}, {"top", top},        {"width", width},
                {"height", height}, {"size", 64},   {"flip", flip != 0}, {"filter", filter}};
      out.push_back(c);
    }
    // Eval: shrink then crop, and enlarge then crop.
    for (const auto& [resize, size] : std::vector<std::pair<int64_t, int64_t>>{{73, 64}, {256, 224}}) {
      Case c;
      c.spec.train = false;
      c.spec.size = size;
      c.spec.resize = resize;
      c.spec.interpolation = interpolation;
      c.plan = plan_sample(c.spec, rows, cols, 0);
      c.json = {{"kind", "eval"}, {"resize", resize}, {"size", size}, {"filter", filter}};
      out.push_back(c);
    }
  }
  return out;
}

struct Format {
  int channels;
  bool jpeg;  // else PNG
};

class PilParity : public ::testing::TestWithParam<Format> {};

TEST_P(PilParity, RenderEqualsTorchvisionOnPilImagesByteForByte) {
  if (!torchvision_available())
    GTEST_SKIP() << "Python torchvision not found at " TRAINER_PYTHON
                 << "; install python3-torchvision (scripts/setup.sh does) to compare with its PIL transforms";
  const int channels = GetParam().channels;
  const bool jpeg = GetParam().jpeg;
  TempDir dir;
  const std::filesystem::path image_path = dir / (jpeg ? "image.jpg" : "image.png");
  ASSERT_TRUE(cv::imwrite(image_path.string(), parity_image(157, 211, channels)));
  const auto bytes = read_file_bytes(image_path);
  const ImageInfo info = probe_image(bytes);
  const cv::Mat decoded = decode_image(bytes, info, channels, 1, image_path);
  const std::vector<Case> all = cases(decoded.rows, decoded.cols);
  nlohmann::json list = nlohmann::json::array();
  for (const Case& c : all) list.push_back(c.json);
  write_text(dir / "cases.json", list.dump());
  const auto python =
      run_command(std::string(TRAINER_PYTHON) + " " TRAINER_SOURCE_DIR "/tests/interop/pil_transforms.py " +
                  image_path.string() + " " + (dir / "cases.json").string() + " " + dir.path().string());
  ASSERT_EQ(python.exit_code, 0) << python.output;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const int size = static_cast<int>(c.spec.size);
    cv::Mat out(size, size, CV_8UC(channels));
    if (jpeg) {
      TransformSpec full_size = c.spec;
      full_size.reduce = false;  // what PIL decodes: the full size
      render_sample(bytes, info, c.plan, full_size, channels, image_path, out);
    } else {
      render(whole_image(decoded), decoded.rows, decoded.cols, c.plan, c.spec, out);
    }
    const auto expected = read_file_bytes(dir / ("case_" + std::to_string(i) + ".raw"));
    ASSERT_EQ(expected.size(), out.total() * out.elemSize()) << c.json.dump();
    const ByteDiff d = byte_diff(expected, out);
    EXPECT_EQ(d.differing, 0u) << c.json.dump() << ": " << d.differing << " of " << expected.size()
                               << " bytes differ, by up to " << d.worst;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PilParity,
                         ::testing::Values(Format{3, false}, Format{1, false}, Format{3, true}, Format{1, true}),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(info.param.channels == 3 ? "rgb" : "gray") +
                                  (info.param.jpeg ? "_jpeg" : "_png");
                         });

}  // namespace
}  // namespace trainer
