// The file lists of an ImageNet-layout dataset, built once before training:
//   ROOT/train/<wnid>/*.JPEG        classes = the folder names in byte order (torchvision's and Caffe's order)
//   ROOT/val/<file> + ROOT/val_label.txt ("<file name> <class index>" per line), or ROOT/val/<wnid>/*.JPEG
// Scanning reads directories only (no stat per file), so 1.28 million files take seconds.
//   FileList train = scan_class_folders(root / "train", list_class_folders(root / "train"));
//   FileList val = read_val_labels(root / "val_label.txt", root / "val", train.class_count());
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace trainer {

// Paths relative to a split folder, kept in one buffer (ImageNet's 1.28M names would be 1.28M allocations).
class FileList {
 public:
  void add(const std::string& relative_path, int64_t label);
  size_t size() const { return labels_.size(); }
  std::string path(size_t i) const { return names_.substr(offsets_[i], offsets_[i + 1] - offsets_[i]); }
  int64_t label(size_t i) const { return labels_[i]; }

 private:
  std::string names_;
  std::vector<size_t> offsets_{0};
  std::vector<int64_t> labels_;
};

// Case-insensitive: jpg, jpeg, png, bmp, ppm, pgm, pbm, tif, tiff, webp (what OpenCV decodes).
bool has_image_extension(const std::string& name);

// The sub-folders of `split_dir`, sorted by bytes. Throws DataError when it is missing or has none.
std::vector<std::string> list_class_folders(const std::filesystem::path& split_dir);

// Every image under split_dir/<class>/, labelled by the class's position; files in name order within a class.
// Throws DataError for a class folder without images.
FileList scan_class_folders(const std::filesystem::path& split_dir, const std::vector<std::string>& classes);

// val_label.txt: "<file name> <class index>" per line; CRLF and blank lines are accepted. Throws DataError with
// file and line for a malformed line, an image not in val_dir, a class index outside [0, class_count), a
// repeated file, or a path that is absolute or leaves val_dir.
FileList read_val_labels(const std::filesystem::path& label_file, const std::filesystem::path& val_dir,
                         size_t class_count);

// Human-readable names from a synset file ("n01440764 tench, Tinca tinca" per line) for the given wnids;
// a wnid the file lacks keeps its own name. Throws DataError when the file cannot be read.
std::vector<std::string> read_class_names(const std::filesystem::path& file, const std::vector<std::string>& wnids);

}  // namespace trainer
