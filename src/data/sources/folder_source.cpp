#include "trainer/data/sources/folder_source.hpp"

#include "trainer/data/pixels/encoded_image.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/sources/encoded_sample.hpp"
#include "trainer/data/sources/holdout_split.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

namespace fs = std::filesystem;

FolderSource::FolderSource(fs::path dir, FileList files, std::vector<std::string> class_names, TransformSpec spec,
                           int64_t channels)
    : dir_(std::move(dir)),
      files_(std::move(files)),
      class_names_(std::move(class_names)),
      spec_(spec),
      channels_(channels) {}

void FolderSource::read_into(size_t i, const ReadContext& context, cv::Mat& out) const {
  EncodedImage unused;
  read_sample(i, context, out, /*defer=*/false, unused);
}

bool FolderSource::read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const {
  return read_sample(i, context, out, /*defer=*/true, deferred);
}

bool FolderSource::read_sample(size_t i, const ReadContext& context, cv::Mat& out, bool defer,
                               EncodedImage& deferred) const {
  const auto start = context.times ? Clock::now() : Clock::time_point();
  const fs::path path = file(i);
  // Each worker reads every file into the same buffer: a file of 100 KB-4 MB allocated per image went through
  // the heap (or, past glibc's mmap threshold, was mapped and page-faulted in afresh) on every sample. The GPU
  // path takes the bytes with it, and the next file starts a new buffer.
  thread_local std::vector<uint8_t> bytes;
  read_file_bytes(path, bytes);
  const auto read_at = context.times ? Clock::now() : Clock::time_point();
  return render_or_defer(bytes, path.string(), i, context, spec_, channels_, out, defer, deferred, start, read_at);
}

bool FolderSource::read_encoded(size_t i, std::vector<uint8_t>& bytes) const {
  read_file_bytes(file(i), bytes);
  return true;
}

std::string FolderSource::describe() const {
  return "image folder " + dir_.string() + " (" + std::to_string(size()) + " images, " +
         std::to_string(class_names_.size()) + " classes; " + describe_transform(spec_) + ")";
}

namespace {

fs::path under_root(const DataConfig& data, const std::string& name) {
  const fs::path p(name);
  return p.is_absolute() ? p : fs::path(data.root) / p;
}

void check_class_count(const fs::path& where, size_t found, int64_t num_classes) {
  if (num_classes != 0 && static_cast<int64_t>(found) != num_classes)
    throw DataError(where.string() + ": " + std::to_string(found) + " classes, but model.num_classes is " +
                    std::to_string(num_classes) + " (leave model.num_classes out, or 0, to take the folder's count)");
}

// data.val_fraction's one class-folder set: ROOT/train_dir, or ROOT itself when it has no such folder.
fs::path holdout_folder(const DataConfig& data) {
  std::error_code ec;
  const fs::path train_dir = under_root(data, data.train_dir);
  return fs::is_directory(train_dir, ec) ? train_dir : fs::path(data.root);
}

std::shared_ptr<const FolderSource> open_holdout_split(const DataConfig& data, bool train, int64_t num_classes,
                                                       int64_t channels, std::optional<bool> augment) {
  const fs::path folder = holdout_folder(data);
  const std::vector<std::string> classes = list_class_folders(folder);
  check_class_count(folder, classes.size(), num_classes);
  const FileList files = scan_class_folders(folder, classes);
  HoldoutLists lists = split_holdout(
      files,
      data.val_files.empty() ? choose_holdout(files, classes, data.val_fraction, data.split_seed) : data.val_files,
      folder);
  std::vector<std::string> names = classes;
  if (!data.class_names_file.empty()) names = read_class_names(under_root(data, data.class_names_file), classes);
  return std::make_shared<FolderSource>(folder, std::move(train ? lists.train : lists.val), std::move(names),
                                        make_transform_spec(data, augment.value_or(train)), channels);
}

}  // namespace

std::vector<std::string> choose_validation_files(const DataConfig& data) {
  std::error_code ec;
  if (!fs::is_directory(data.root, ec)) throw DataError(data.root + ": no such folder (data.root)");
  const fs::path folder = holdout_folder(data);
  const std::vector<std::string> classes = list_class_folders(folder);
  return choose_holdout(scan_class_folders(folder, classes), classes, data.val_fraction, data.split_seed);
}

std::shared_ptr<const FolderSource> open_image_folder(const DataConfig& data, bool train, int64_t num_classes,
                                                      int64_t channels, std::optional<bool> augment) {
  std::error_code ec;
  if (!fs::is_directory(data.root, ec)) throw DataError(data.root + ": no such folder (data.root)");
  if (data.val_fraction > 0) return open_holdout_split(data, train, num_classes, channels, augment);
  const fs::path train_dir = under_root(data, data.train_dir), val_dir = under_root(data, data.val_dir);
  const fs::path label_file = under_root(data, data.val_labels);
  // Classes are the train folder's sub-folders. An eval-only copy (val/ + val_label.txt) numbers them.
  std::vector<std::string> classes;
  if (train || fs::is_directory(train_dir, ec)) {
    classes = list_class_folders(train_dir);
    check_class_count(train_dir, classes.size(), num_classes);
  } else {
    if (num_classes == 0)
      throw DataError(train_dir.string() + ": no such folder, so the classes cannot be counted; set model.num_classes");
    for (int64_t c = 0; c < num_classes; ++c) classes.push_back(std::to_string(c));
  }
  FileList files;
  fs::path dir;
  if (train) {
    dir = train_dir;
    files = scan_class_folders(train_dir, classes);
  } else if (fs::exists(label_file, ec)) {
    dir = val_dir;
    files = read_val_labels(label_file, val_dir, classes.size());
  } else {
    dir = val_dir;
    if (!fs::is_directory(val_dir, ec))
      throw DataError(val_dir.string() + ": no such folder, and no " + label_file.string() + " either");
    const auto val_classes = list_class_folders(val_dir);
    if (val_classes != classes)
      throw DataError(val_dir.string() + ": without " + label_file.string() + " it must hold the same " +
                      std::to_string(classes.size()) + " class folders as " + train_dir.string() + ", found " +
                      std::to_string(val_classes.size()) + " that differ");
    files = scan_class_folders(val_dir, classes);
  }
  std::vector<std::string> names = classes;
  if (!data.class_names_file.empty()) names = read_class_names(under_root(data, data.class_names_file), classes);
  return std::make_shared<FolderSource>(dir, std::move(files), std::move(names),
                                        make_transform_spec(data, augment.value_or(train)), channels);
}

}  // namespace trainer
