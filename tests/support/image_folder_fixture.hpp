// Tiny ImageNet-layout folders written with OpenCV: ROOT/train/<class>/*.{JPEG,png}, ROOT/val/*.JPEG and
// ROOT/val_label.txt. Each class has its own colour, so a model can learn them; sizes vary per image.
#pragma once

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trainer::testing {

// A w x h BGR image for class `label`: a class colour plus a gradient and a per-image offset.
inline cv::Mat class_image(int label, int w, int h, int variant) {
  static const cv::Scalar colours[] = {{40, 40, 220}, {40, 200, 40}, {220, 60, 40}, {200, 200, 40}, {200, 40, 200}};
  cv::Mat image(h, w, CV_8UC3, colours[label % 5]);
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c) {
      auto& px = image.at<cv::Vec3b>(r, c);
      const int d = (r * 3 + c * 5 + variant * 17) % 40;
      for (int k = 0; k < 3; ++k) px[k] = cv::saturate_cast<uchar>(px[k] + d - 20);
    }
  return image;
}

struct ImageFolderSpec {
  int classes = 3;
  int train_per_class = 4;
  int val_per_class = 2;
  bool val_label_file = true;  // flat val/ + val_label.txt, else val/<class>/
};

// Class folders are named n0, n1, ... Train images alternate JPEG and PNG; val images are JPEG.
inline void write_image_folder(const std::filesystem::path& root, const ImageFolderSpec& spec = {}) {
  namespace fs = std::filesystem;
  for (int c = 0; c < spec.classes; ++c) {
    const fs::path dir = root / "train" / ("n" + std::to_string(c));
    fs::create_directories(dir);
    for (int i = 0; i < spec.train_per_class; ++i) {
      const std::string name = "img" + std::to_string(i) + (i % 2 ? ".png" : ".JPEG");
      cv::imwrite((dir / name).string(), class_image(c, 40 + 7 * i, 36 + 5 * c, i));
    }
  }
  std::ofstream labels;
  if (spec.val_label_file) labels.open(root / "val_label.txt");
  fs::create_directories(root / "val");
  int n = 0;
  for (int c = 0; c < spec.classes; ++c)
    for (int i = 0; i < spec.val_per_class; ++i) {
      const std::string name = "ILSVRC2012_val_" + std::to_string(++n) + ".JPEG";
      const fs::path dir = spec.val_label_file ? root / "val" : root / "val" / ("n" + std::to_string(c));
      fs::create_directories(dir);
      cv::imwrite((dir / name).string(), class_image(c, 48 + 3 * i, 40, 100 + i));
      if (spec.val_label_file) labels << name << " " << c << "\n";
    }
}

}  // namespace trainer::testing
