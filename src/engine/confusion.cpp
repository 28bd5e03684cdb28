#include "trainer/engine/confusion.hpp"

#include <algorithm>
#include <numeric>

namespace trainer {

namespace {

// The matrix as a row-major CPU int64 array, for plain loops.
std::vector<int64_t> cells(const torch::Tensor& confusion) {
  const auto c = confusion.to(torch::kCPU, torch::kInt64).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

std::vector<ClassScore> per_class_scores(const torch::Tensor& confusion) {
  const int64_t n = confusion.size(0);
  const auto m = cells(confusion);
  std::vector<ClassScore> out(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t p = 0; p < n; ++p) out[t].images += m[t * n + p];
    out[t].correct = m[t * n + t];
  }
  return out;
}

std::vector<ConfusedPair> most_confused_pairs(const torch::Tensor& confusion, size_t count) {
  const int64_t n = confusion.size(0);
  const auto m = cells(confusion);
  std::vector<ConfusedPair> pairs;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t p = 0; p < n; ++p)
      if (t != p && m[t * n + p] > 0) pairs.push_back({t, p, m[t * n + p]});
  const auto first = [](const ConfusedPair& a, const ConfusedPair& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.truth != b.truth ? a.truth < b.truth : a.predicted < b.predicted;
  };
  const size_t keep = std::min(count, pairs.size());
  std::partial_sort(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(keep), pairs.end(), first);
  pairs.resize(keep);
  return pairs;
}

std::vector<int64_t> most_confused_classes(const torch::Tensor& confusion, size_t count) {
  const int64_t n = confusion.size(0);
  const auto m = cells(confusion);
  std::vector<int64_t> errors(static_cast<size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t p = 0; p < n; ++p)
      if (t != p) {
        errors[t] += m[t * n + p];
        errors[p] += m[t * n + p];
      }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return errors[a] > errors[b]; });
  order.resize(std::min(count, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

double balanced_accuracy(const std::vector<ClassScore>& scores) {
  double sum = 0;
  int64_t classes = 0;
  for (const auto& c : scores)
    if (c.images > 0) {
      sum += c.accuracy();
      ++classes;
    }
  return classes ? sum / static_cast<double>(classes) : 0.0;
}

}  // namespace trainer
