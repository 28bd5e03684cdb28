// Pillow's colour and tone operations on 8-bit images, as torchvision's PIL functions call them, reproduced bit
// for bit: ImageEnhance (Brightness, Color, Contrast, Sharpness: Image.blend of the image with a "degenerate"
// version, in float with truncation), ImageOps (posterize, solarize, autocontrast, equalize, invert: lookup
// tables) and torchvision's adjust_hue (PIL's HSV conversion). Images are CV_8UC1 or CV_8UC3 in RGB order and
// are changed in place.
//   pil_contrast(image, 1.4f);  pil_equalize(image);
#pragma once

#include <opencv2/core.hpp>

namespace trainer {

// ImageEnhance.<X>(image).enhance(factor). Pillow takes the factor as a C float.
void pil_brightness(cv::Mat& image, float factor);
void pil_color(cv::Mat& image, float factor);  // saturation; grey images are unchanged
void pil_contrast(cv::Mat& image, float factor);
void pil_sharpness(cv::Mat& image, float factor);

// ImageOps.
void pil_posterize(cv::Mat& image, int bits);
void pil_solarize(cv::Mat& image, double threshold);
void pil_autocontrast(cv::Mat& image);
void pil_equalize(cv::Mat& image);
void pil_invert(cv::Mat& image);

// torchvision.transforms.functional.adjust_hue on a PIL image, hue_factor in [-0.5, 0.5]; grey images unchanged.
void pil_adjust_hue(cv::Mat& image, double hue_factor);

// Image.convert("L") of an RGB image (ITU-R 601-2 luma in Pillow's fixed point); a grey image is copied.
cv::Mat pil_to_grey(const cv::Mat& image);

}  // namespace trainer
