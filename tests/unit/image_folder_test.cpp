#include <gtest/gtest.h>

#include <functional>

#include "support/fixtures.hpp"
#include "trainer/data/sources/image_folder.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::TempDir;
using testing::write_text;
namespace fs = std::filesystem;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  write_text(p, "x");  // the index never decodes; content does not matter here
}

TEST(ImageFolder, ClassesAreFolderNamesInByteOrderAndFilesAreSorted) {
  TempDir dir;
  const fs::path train = dir / "train";
  for (const char* f : {"n02/b.JPEG", "n02/a.jpeg", "n01/z.PNG", "n01/notes.txt", "Z/x.jpg", "n10/c.webp"})
    touch(train / f);
  fs::create_directories(train / "n01" / "nested");
  const auto classes = list_class_folders(train);
  EXPECT_EQ(classes, (std::vector<std::string>{"Z", "n01", "n02", "n10"}));  // bytes: 'Z' < 'n'
  const FileList list = scan_class_folders(train, classes);
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list.path(0), "Z/x.jpg");
  EXPECT_EQ(list.path(1), "n01/z.PNG");
  EXPECT_EQ(list.path(2), "n02/a.jpeg");
  EXPECT_EQ(list.path(3), "n02/b.JPEG");
  EXPECT_EQ(list.path(4), "n10/c.webp");
  EXPECT_EQ(list.label(0), 0);
  EXPECT_EQ(list.label(3), 2);
  EXPECT_EQ(list.label(4), 3);
}

TEST(ImageFolder, MissingOrEmptyFoldersAreClearErrors) {
  TempDir dir;
  EXPECT_NE(testing::error_of<DataError>([&] { list_class_folders(dir / "train"); }).find("train: no such folder"),
            std::string::npos);
  fs::create_directories(dir / "train");
  EXPECT_NE(testing::error_of<DataError>([&] { list_class_folders(dir / "train"); }).find("no class folders"),
            std::string::npos);
  touch(dir / "train" / "a" / "1.jpg");
  touch(dir / "train" / "b" / "readme.txt");
  EXPECT_NE(testing::error_of<DataError>([&] {
              scan_class_folders(dir / "train", {"a", "b"});
            }).find("b: class folder holds no images"),
            std::string::npos);
}

TEST(ImageFolder, ExtensionsAreCaseInsensitive) {
  for (const char* yes : {"a.JPEG", "a.jpg", "b.Png", "c.tiff", "d.BMP", "e.webp"})
    EXPECT_TRUE(has_image_extension(yes)) << yes;
  for (const char* no : {"a.txt", "JPEG", "a.jpeg.bak", ".hidden", "a."}) EXPECT_FALSE(has_image_extension(no)) << no;
}

class ValLabels : public ::testing::Test {
 protected:
  TempDir dir;
  void SetUp() override {
    for (const char* f : {"v1.JPEG", "v2.JPEG", "v3.png"}) touch(dir / "val" / f);
  }
  std::string error_for(const std::string& text) {
    write_text(dir / "val_label.txt", text);
    return testing::error_of<DataError>([&] { read_val_labels(dir / "val_label.txt", dir / "val", 4); });
  }
};

TEST_F(ValLabels, ReadsLinesWithCrlfAndBlankLines) {
  write_text(dir / "val_label.txt", "v1.JPEG 3\r\n\r\nv2.JPEG 0\r\n   \nv3.png 1");
  const FileList list = read_val_labels(dir / "val_label.txt", dir / "val", 4);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list.path(0), "v1.JPEG");
  EXPECT_EQ(list.label(0), 3);
  EXPECT_EQ(list.path(2), "v3.png");
  EXPECT_EQ(list.label(2), 1);
}

TEST_F(ValLabels, RejectsBadLinesNamingFileAndLine) {
  const std::string file = (dir / "val_label.txt").string();
  EXPECT_NE(error_for("v1.JPEG 0\nv9.JPEG 1\n").find(file + ":2: no image " + (dir / "val" / "v9.JPEG").string()),
            std::string::npos);
  EXPECT_NE(error_for("v1.JPEG 4\n").find(file + ":1: class index \"4\" is not in [0, 4)"), std::string::npos);
  EXPECT_NE(error_for("v1.JPEG -1\n").find("class index \"-1\""), std::string::npos);
  EXPECT_NE(error_for("v1.JPEG 1x\n").find("class index \"1x\""), std::string::npos);
  EXPECT_NE(error_for("v1.JPEG 0\n\nv1.JPEG 2\n").find(file + ":3: \"v1.JPEG\" is listed again (first on line 1)"),
            std::string::npos);
  EXPECT_NE(error_for("/etc/passwd 0\n").find(file + ":1: absolute path \"/etc/passwd\""), std::string::npos);
  EXPECT_NE(error_for("../train/a.jpg 0\n").find("\"../train/a.jpg\" leaves"), std::string::npos);
  EXPECT_NE(error_for("sub/v1.JPEG 0\n").find("is not a file directly in"), std::string::npos);
  EXPECT_NE(error_for("v1.JPEG\n").find(file + ":1: expected \"<file name> <class index>\""), std::string::npos);
  EXPECT_NE(error_for("v1.JPEG 0 7\n").find("expected \"<file name> <class index>\""), std::string::npos);
  EXPECT_NE(error_for("\n\n").find("lists no images"), std::string::npos);
}

TEST(ImageFolder, ClassNamesFromASynsetFile) {
  TempDir dir;
  write_text(dir / "synsets.txt", "n01440764 tench, Tinca tinca\r\nn01443537 goldfish, Carassius auratus\n\n");
  EXPECT_EQ(read_class_names(dir / "synsets.txt", {"n01443537", "n99999999", "n01440764"}),
            (std::vector<std::string>{"goldfish, Carassius auratus", "n99999999", "tench, Tinca tinca"}));
  EXPECT_NE(testing::error_of<DataError>([&] { read_class_names(dir / "none.txt", {}); }).find("none.txt: cannot open"),
            std::string::npos);
}

}  // namespace
}  // namespace trainer
