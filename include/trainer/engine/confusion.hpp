// What a confusion matrix says (rows: true class, columns: predicted; int64 [C, C]): per-class accuracy, the
// most confused (true, predicted) pairs, and the classes worth showing when there are too many to draw.
//   auto classes = per_class_scores(r.confusion);  auto pairs = most_confused_pairs(r.confusion, 10);
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace trainer {

struct ClassScore {
  int64_t images = 0;   // images of this class
  int64_t correct = 0;  // of them, predicted as this class
  double accuracy() const { return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
};

struct ConfusedPair {
  int64_t truth = 0;
  int64_t predicted = 0;
  int64_t count = 0;  // images of class `truth` predicted as `predicted`
};

std::vector<ClassScore> per_class_scores(const torch::Tensor& confusion);

// The mean of the per-class accuracies (recalls) over the classes that have images: top-1 as if every class were
// equally common (scikit-learn's balanced_accuracy_score). 0 without images.
double balanced_accuracy(const std::vector<ClassScore>& scores);

// The `n` largest off-diagonal cells with a count above zero, largest first (ties: by truth, then predicted).
std::vector<ConfusedPair> most_confused_pairs(const torch::Tensor& confusion, size_t n);

// The `n` classes with the most errors, as true class plus as prediction (ties: lower index), in index order.
// All classes when there are at most n.
std::vector<int64_t> most_confused_classes(const torch::Tensor& confusion, size_t n);

}  // namespace trainer
