#include "trainer/data/sources.hpp"

#include "trainer/data/mnist_idx.hpp"
#include "trainer/data/subset.hpp"
#include "trainer/data/synthetic.hpp"

namespace trainer {

std::shared_ptr<const ImageSource> make_source(const DataConfig& data, Split split, int64_t num_classes,
                                               int64_t seed) {
  std::shared_ptr<const ImageSource> source;
  switch (data.kind) {
    case DataKind::mnist:
      source = std::make_shared<MnistIdx>(MnistIdx::find_files(data.root, split == Split::train ? "train" : "t10k"),
                                          num_classes);
      break;
    case DataKind::synthetic: {
      const auto& s = data.synthetic;
      // The eval split gets its own images: a different seed stream, never the training samples.
      const uint64_t split_seed = static_cast<uint64_t>(seed) * 2 + (split == Split::train ? 0 : 1);
      source = std::make_shared<SyntheticSource>(split == Split::train ? s.train_size : s.eval_size,
                                                 ImageShape{s.height, s.width, s.channels}, num_classes, split_seed);
      break;
    }
  }
  const int64_t limit = split == Split::train ? data.limit_train : data.limit_eval;
  return make_subset(std::move(source), static_cast<size_t>(limit));
}

}  // namespace trainer
