#include "trainer/data/sources/subset.hpp"

#include "trainer/util/error.hpp"

namespace trainer {
namespace {

class SubsetSource final : public ImageSource {
 public:
  SubsetSource(std::shared_ptr<const ImageSource> base, std::vector<size_t> indices, std::string what)
      : base_(std::move(base)), indices_(std::move(indices)), what_(std::move(what)) {}
  size_t size() const override { return indices_.size(); }
  int64_t label(size_t i) const override { return base_->label(indices_.at(i)); }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override {
    base_->read_into(indices_.at(i), context, out);
  }
  bool read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const override {
    return base_->read_or_defer(indices_.at(i), context, out, deferred);
  }
  bool read_encoded(size_t i, std::vector<uint8_t>& bytes) const override {
    return base_->read_encoded(indices_.at(i), bytes);
  }
  void prefetch(const std::vector<size_t>& indices) const override {
    std::vector<size_t> mapped;
    mapped.reserve(indices.size());
    for (size_t i : indices) mapped.push_back(indices_.at(i));
    base_->prefetch(mapped);
  }
  const std::vector<std::string>& class_names() const override { return base_->class_names(); }
  ImageShape shape() const override { return base_->shape(); }
  std::string sample_name(size_t i) const override { return base_->sample_name(indices_.at(i)); }
  std::string describe() const override { return base_->describe() + ", " + what_; }
  std::string take_news() const override { return base_->take_news(); }

 private:
  std::shared_ptr<const ImageSource> base_;
  std::vector<size_t> indices_;
  std::string what_;
};

class RenamedSource final : public ImageSource {
 public:
  RenamedSource(std::shared_ptr<const ImageSource> base, std::vector<std::string> names)
      : base_(std::move(base)), names_(std::move(names)) {}
  size_t size() const override { return base_->size(); }
  int64_t label(size_t i) const override { return base_->label(i); }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override {
    base_->read_into(i, context, out);
  }
  bool read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const override {
    return base_->read_or_defer(i, context, out, deferred);
  }
  bool read_encoded(size_t i, std::vector<uint8_t>& bytes) const override { return base_->read_encoded(i, bytes); }
  void prefetch(const std::vector<size_t>& indices) const override { base_->prefetch(indices); }
  const std::vector<std::string>& class_names() const override { return names_; }
  ImageShape shape() const override { return base_->shape(); }
  std::string sample_name(size_t i) const override { return base_->sample_name(i); }
  std::string describe() const override { return base_->describe(); }
  std::string take_news() const override { return base_->take_news(); }

 private:
  std::shared_ptr<const ImageSource> base_;
  std::vector<std::string> names_;
};

}  // namespace

std::shared_ptr<const ImageSource> make_subset(std::shared_ptr<const ImageSource> base, size_t count) {
  if (count == 0 || count >= base->size()) return base;
  const size_t n = base->size();
  std::vector<size_t> indices;
  indices.reserve(count);
  for (size_t i = 0; i < count; ++i) indices.push_back(i * n / count);
  return std::make_shared<SubsetSource>(std::move(base), std::move(indices), "subset of " + std::to_string(count));
}

std::shared_ptr<const ImageSource> make_shard(std::shared_ptr<const ImageSource> base, size_t rank, size_t world) {
  if (world == 1) return base;
  const size_t n = base->size(), first = rank * n / world, end = (rank + 1) * n / world;
  std::vector<size_t> indices(end - first);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = first + i;
  return std::make_shared<SubsetSource>(std::move(base), std::move(indices),
                                        "shard " + std::to_string(rank) + " of " + std::to_string(world));
}

std::shared_ptr<const ImageSource> with_class_names(std::shared_ptr<const ImageSource> base,
                                                    std::vector<std::string> names) {
  if (names.empty()) return base;
  if (names.size() != base->class_names().size())  // model.num_classes was taken from the data
    throw ConfigError("data.class_names: " + std::to_string(names.size()) + " names, but the data has " +
                      std::to_string(base->class_names().size()) + " classes");
  return std::make_shared<RenamedSource>(std::move(base), std::move(names));
}

}  // namespace trainer
