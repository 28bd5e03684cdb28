#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "trainer/data/sources/mnist_idx.hpp"
#include "trainer/data/sources/subset.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;

std::string data_error(const IdxFiles& files, int64_t classes = 10) {
  try {
    MnistIdx source(files, classes);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

class MnistIdxTest : public ::testing::TestWithParam<bool> {};

TEST_P(MnistIdxTest, ReadsImagesAndLabels) {
  TempDir dir;
  write_mnist_dir(dir.path(), 20, 10, 10, /*gzip=*/GetParam());
  const auto files = MnistIdx::find_files(dir.path(), "train");
  const MnistIdx source(files, 10);
  ASSERT_EQ(source.size(), 20u);
  const auto labels = make_labels(20, 10, 1);
  const auto images = idx_images(labels, 28, 28, 10, 1);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(source.label(i), labels[i]);
    const Sample s = source.read(i);
    ASSERT_EQ(s.image.rows, 28);
    ASSERT_EQ(s.image.type(), CV_8UC1);
    EXPECT_EQ(0, std::memcmp(s.image.data, images.data() + 16 + i * 784, 784));
  }
  EXPECT_EQ(source.shape().height, 28);
  EXPECT_EQ(source.class_names().size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, MnistIdxTest, ::testing::Values(false, true));

TEST(MnistIdx, PrefersUncompressedAndFindsTestSplit) {
  TempDir dir;
  write_mnist_dir(dir.path(), 4, 3, 10, true);
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_images(make_labels(3, 10, 2), 28, 28, 10, 2), false);
  const auto files = MnistIdx::find_files(dir.path(), "t10k");
  EXPECT_EQ(files.images.filename(), "t10k-images-idx3-ubyte");
  EXPECT_EQ(files.labels.filename(), "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(MnistIdx(files, 10).size(), 3u);
}

TEST(MnistIdx, MissingFilesNameTheFolder) {
  TempDir dir;
  try {
    MnistIdx::find_files(dir.path(), "train");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no train-images* file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MnistIdx::find_files(dir / "nope", "train"), DataError);
}

TEST(MnistIdx, BadMagic) {
  TempDir dir;
  const auto labels = make_labels(2, 10, 1);
  write_bytes(dir / "img", idx_labels(labels), false);  // a label file where images belong
  write_bytes(dir / "lab", idx_labels(labels), false);
  EXPECT_NE(data_error({dir / "img", dir / "lab"}).find("bad magic number 2049, expected 2051"), std::string::npos);
}

TEST(MnistIdx, TruncatedFileReportsExpectedAndFoundBytes) {
  TempDir dir;
  const auto labels = make_labels(5, 10, 1);
  auto images = idx_images(labels, 28, 28, 10, 1);
  images.resize(images.size() - 100);
  write_bytes(dir / "img", images, false);
  write_bytes(dir / "lab", idx_labels(labels), false);
  const std::string message = data_error({dir / "img", dir / "lab"});
  EXPECT_NE(message.find("truncated: expected 3936 bytes, found 3836"), std::string::npos) << message;
  EXPECT_NE(message.find((dir / "img").string()), std::string::npos);
}

TEST(MnistIdx, TruncatedGzipStream) {
  TempDir dir;
  write_mnist_dir(dir.path(), 50, 2, 10, true);
  const auto path = dir / "train-images-idx3-ubyte.gz";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const std::string message = data_error(MnistIdx::find_files(dir.path(), "train"));
  EXPECT_NE(message.find("train-images-idx3-ubyte.gz"), std::string::npos) << message;
}

TEST(MnistIdx, CountMismatch) {
  TempDir dir;
  write_bytes(dir / "img", idx_images(make_labels(5, 10, 1), 28, 28, 10, 1), false);
  write_bytes(dir / "lab", idx_labels(make_labels(4, 10, 1)), false);
  EXPECT_NE(data_error({dir / "img", dir / "lab"}).find("holds 5 images but"), std::string::npos);
}

TEST(MnistIdx, LabelOutOfRange) {
  TempDir dir;
  const std::vector<uint8_t> labels{1, 2, 9};
  write_bytes(dir / "img", idx_images(labels, 28, 28, 10, 1), false);
  write_bytes(dir / "lab", idx_labels(labels), false);
  EXPECT_NE(data_error({dir / "img", dir / "lab"}, 5).find("label 9 at index 2 is not below model.num_classes (5)"),
            std::string::npos);
}

// An IDX header as bytes: magic, then each dimension big-endian.
std::vector<uint8_t> idx_header(uint32_t magic, const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> bytes;
  for (const uint32_t v : [&] {
         std::vector<uint32_t> all{magic};
         all.insert(all.end(), dims.begin(), dims.end());
         return all;
       }())
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
  return bytes;
}

// 2^22 x 2^21 x 2^21 is 2^64: a product that wraps to 0 must not pass for a 16-byte file of no pixels.
TEST(MnistIdx, DimensionsWhoseProductWrapsAreRefused) {
  TempDir dir;
  write_bytes(dir / "img", idx_header(2051, {1u << 22, 1u << 21, 1u << 21}), false);
  write_bytes(dir / "lab", idx_labels(make_labels(2, 10, 1)), false);
  const std::string message = data_error({dir / "img", dir / "lab"});
  EXPECT_NE(message.find((dir / "img").string() + ": dimensions whose product does not fit in 64 bits"),
            std::string::npos)
      << message;
}

TEST(MnistIdx, ImagesWiderThanAnyIdxSetAreRefused) {
  TempDir dir;
  write_bytes(dir / "img", idx_header(2051, {0, 1, 100000}), false);
  write_bytes(dir / "lab", idx_header(2049, {0}), false);
  EXPECT_NE(data_error({dir / "img", dir / "lab"}).find("image size is 1x100000"), std::string::npos);
}

// A gzip stream that inflates past the size its header declares stops there: a few kilobytes of gzip must not
// inflate to gigabytes before the length is checked.
TEST(MnistIdx, GzipInflatesNoFurtherThanTheHeaderDeclares) {
  TempDir dir;
  const auto labels = make_labels(2, 10, 1);
  auto images = idx_images(labels, 28, 28, 10, 1);
  images.resize(images.size() + (64 << 20), 0);  // 64 MiB of zeros after the two images: 64 KiB of gzip
  write_bytes(dir / "img.gz", images, true);
  write_bytes(dir / "lab", idx_labels(labels), false);
  EXPECT_LT(std::filesystem::file_size(dir / "img.gz"), 1u << 20);
  const std::string message = data_error({dir / "img.gz", dir / "lab"});
  EXPECT_NE(message.find("img.gz: trailing data: expected 1584 bytes, found more"), std::string::npos) << message;
}

// A header declaring 1 GB in a few kilobytes of gzip is refused before anything is inflated past the header: the
// bytes on disk could never have held it at the ratios real IDX sets compress to.
TEST(MnistIdx, GzipDeclaringFarMoreThanItsBytesIsRefusedBeforeInflating) {
  TempDir dir;
  auto images = idx_header(2051, {1000, 1000, 1000});
  images.resize(images.size() + (1 << 20), 0);  // 1 MiB of the declared 1 GB: ~1 KiB of gzip
  write_bytes(dir / "img.gz", images, true);
  write_bytes(dir / "lab", idx_header(2049, {1000}), false);
  const auto compressed = std::filesystem::file_size(dir / "img.gz");
  const std::string message = data_error({dir / "img.gz", dir / "lab"});
  EXPECT_NE(message.find("img.gz: its header declares 1000000016 bytes, more than 64 times its " +
                         std::to_string(compressed) + " compressed bytes"),
            std::string::npos)
      << message;
}

// model.num_classes 0: the classes are the largest label + 1.
TEST(MnistIdx, ClassesFromTheLabelsWhenNotGiven) {
  TempDir dir;
  const std::vector<uint8_t> labels{1, 6, 2};
  write_bytes(dir / "img", idx_images(labels, 28, 28, 10, 1), false);
  write_bytes(dir / "lab", idx_labels(labels), false);
  const auto source = std::make_shared<MnistIdx>(IdxFiles{dir / "img", dir / "lab"}, 0);
  EXPECT_EQ(source->class_names().size(), 7u);
  // data.class_names must then name that many classes.
  try {
    with_class_names(source, {"a", "b", "c"});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "config: data.class_names: 3 names, but the data has 7 classes");
  }
}

}  // namespace
}  // namespace trainer
