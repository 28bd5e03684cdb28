#include "trainer/data/subset.hpp"

namespace trainer {
namespace {

class SubsetSource final : public ImageSource {
 public:
  SubsetSource(std::shared_ptr<const ImageSource> base, size_t count) : base_(std::move(base)) {
    const size_t n = base_->size();
    indices_.reserve(count);
    for (size_t i = 0; i < count; ++i) indices_.push_back(i * n / count);
  }
  size_t size() const override { return indices_.size(); }
  int64_t label(size_t i) const override { return base_->label(indices_.at(i)); }
  void read_into(size_t i, const ReadContext& context, cv::Mat& out) const override {
    base_->read_into(indices_.at(i), context, out);
  }
  const std::vector<std::string>& class_names() const override { return base_->class_names(); }
  ImageShape shape() const override { return base_->shape(); }
  std::string sample_name(size_t i) const override { return base_->sample_name(indices_.at(i)); }
  std::string describe() const override {
    return base_->describe() + ", subset of " + std::to_string(indices_.size());
  }

 private:
  std::shared_ptr<const ImageSource> base_;
  std::vector<size_t> indices_;
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
  const std::vector<std::string>& class_names() const override { return names_; }
  ImageShape shape() const override { return base_->shape(); }
  std::string sample_name(size_t i) const override { return base_->sample_name(i); }
  std::string describe() const override { return base_->describe(); }

 private:
  std::shared_ptr<const ImageSource> base_;
  std::vector<std::string> names_;
};

}  // namespace

std::shared_ptr<const ImageSource> make_subset(std::shared_ptr<const ImageSource> base, size_t count) {
  if (count == 0 || count >= base->size()) return base;
  return std::make_shared<SubsetSource>(std::move(base), count);
}

std::shared_ptr<const ImageSource> with_class_names(std::shared_ptr<const ImageSource> base,
                                                    std::vector<std::string> names) {
  if (names.empty()) return base;
  return std::make_shared<RenamedSource>(std::move(base), std::move(names));
}

}  // namespace trainer
