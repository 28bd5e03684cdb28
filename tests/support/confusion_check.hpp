// evaluate()'s confusion matrix and per-class counts, counted on the model's device, against a matrix counted on the
// host from the predictions evaluate() hands each batch (on_batch): the unit tests run it on the CPU, the cuda
// tests on a GPU.
//   expect_confusion_counts_match(torch::Device(torch::kCUDA, 0));
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>

#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/device/model_input.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/models/factory.hpp"

namespace trainer::testing {

inline void expect_confusion_counts_match(const torch::Device& device) {
  constexpr int64_t kClasses = 5;
  torch::manual_seed(3);
  ModelConfig m;
  m.arch = "resnet18";
  m.stem = StemKind::small;
  m.in_channels = 3;
  m.num_classes = kClasses;
  auto model = build_model(m, {8, 8, 3});
  place_model(*model, device, /*channels_last=*/false);
  // 70 images in batches of 16: the last batch is partial.
  auto data = std::make_shared<SyntheticSource>(70, ImageShape{8, 8, 3}, kClasses, 11);
  EvalOptions options;
  options.batch_size = 16;
  options.device = device;
  options.norm = make_normalization({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}, 3, device);
  options.confusion = true;
  auto expected = torch::zeros({kClasses, kClasses}, torch::kInt64);
  int64_t batches = 0;
  options.on_batch = [&](size_t, const torch::Tensor& classes, const torch::Tensor&, const torch::Tensor& labels) {
    ++batches;
    for (int64_t i = 0; i < labels.size(0); ++i) expected[labels[i].item<int64_t>()][classes[i][0].item<int64_t>()] += 1;
  };
  const EvalResult r = evaluate(*model, data, options);
  EXPECT_EQ(batches, 5);
  ASSERT_TRUE(r.confusion.defined());
  EXPECT_EQ(r.confusion.device().type(), torch::kCPU);
  EXPECT_TRUE(torch::equal(r.confusion, expected)) << r.confusion << "\n" << expected;
  EXPECT_EQ(r.confusion.sum().item<int64_t>(), 70);
  EXPECT_EQ(r.confusion.diagonal().sum().item<int64_t>(), r.correct1);
  // The per-class counts every evaluation makes are the matrix's rows and diagonal; without the matrix (every
  // training evaluation) they are made all the same, and no C x C tensor is.
  const auto rows = per_class_scores(expected);
  ASSERT_EQ(r.classes.size(), rows.size());
  for (size_t c = 0; c < rows.size(); ++c) {
    EXPECT_EQ(r.classes[c].images, rows[c].images) << c;
    EXPECT_EQ(r.classes[c].correct, rows[c].correct) << c;
  }
  options.confusion = false;
  options.on_batch = nullptr;
  const EvalResult plain = evaluate(*model, data, options);
  EXPECT_FALSE(plain.confusion.defined());
  ASSERT_EQ(plain.classes.size(), rows.size());
  for (size_t c = 0; c < rows.size(); ++c) EXPECT_EQ(plain.classes[c].correct, rows[c].correct) << c;
  EXPECT_EQ(balanced_accuracy(plain.classes), balanced_accuracy(rows));
}

}  // namespace trainer::testing
