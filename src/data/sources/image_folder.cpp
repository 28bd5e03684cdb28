#include "trainer/data/sources/image_folder.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// Names of the regular files (or of the folders) directly in `dir`, sorted by bytes. directory_entry's type
// comes from readdir, so this costs no stat per file on Linux file systems.
std::vector<std::string> list_dir(const fs::path& dir, bool folders) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw DataError(dir.string() + ": cannot list (" + ec.message() + ")");
  std::vector<std::string> names;
  for (const auto& entry : it) {
    const bool wanted = folders ? entry.is_directory(ec) : entry.is_regular_file(ec);
    if (wanted) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string trim_line_end(std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

}  // namespace

void FileList::add(const std::string& relative_path, int64_t label) {
  names_ += relative_path;
  offsets_.push_back(names_.size());
  labels_.push_back(label);
}

bool has_image_extension(const std::string& name) {
  static const std::unordered_set<std::string> extensions{".jpg", ".jpeg", ".png", ".bmp",  ".ppm",
                                                          ".pgm", ".pbm",  ".tif", ".tiff", ".webp"};
  const auto dot = name.rfind('.');
  return dot != std::string::npos && extensions.count(ascii_lower(name.substr(dot))) > 0;
}

std::vector<std::string> list_class_folders(const fs::path& split_dir) {
  std::error_code ec;
  if (!fs::is_directory(split_dir, ec)) throw DataError(split_dir.string() + ": no such folder");
  auto classes = list_dir(split_dir, /*folders=*/true);
  if (classes.empty())
    throw DataError(split_dir.string() + ": no class folders (expected " + split_dir.string() + "/<class>/*.JPEG)");
  return classes;
}

FileList scan_class_folders(const fs::path& split_dir, const std::vector<std::string>& classes) {
  FileList list;
  for (size_t c = 0; c < classes.size(); ++c) {
    size_t found = 0;
    for (const auto& name : list_dir(split_dir / classes[c], /*folders=*/false))
      if (has_image_extension(name)) {
        list.add(classes[c] + "/" + name, static_cast<int64_t>(c));
        ++found;
      }
    if (found == 0) throw DataError((split_dir / classes[c]).string() + ": class folder holds no images");
  }
  return list;
}

FileList read_val_labels(const fs::path& label_file, const fs::path& val_dir, size_t class_count) {
  std::ifstream in(label_file);
  if (!in) throw DataError(label_file.string() + ": cannot open");
  std::error_code ec;
  if (!fs::is_directory(val_dir, ec))
    throw DataError(val_dir.string() + ": no such folder (named by " + label_file.string() + ")");
  // One listing of val/ answers "does this image exist" for all 50,000 lines without a stat each.
  const auto listed = list_dir(val_dir, /*folders=*/false);
  const std::unordered_set<std::string> present(listed.begin(), listed.end());
  std::unordered_map<std::string, size_t> seen;  // file -> line
  FileList list;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    line = trim_line_end(line);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string at = label_file.string() + ":" + std::to_string(number) + ": ";
    std::istringstream fields(line);
    std::string name, index_text, extra;
    if (!(fields >> name >> index_text) || (fields >> extra))
      throw DataError(at + "expected \"<file name> <class index>\", got \"" + line + "\"");
    if (!name.empty() && name.front() == '/')
      throw DataError(at + "absolute path \"" + name + "\"; expected a file in " + val_dir.string());
    if (name == "." || name == ".." || name.find('/') != std::string::npos)
      throw DataError(at + "\"" + name + "\" " +
                      (name.find("..") != std::string::npos ? "leaves " : "is not a file directly in ") +
                      val_dir.string());
    size_t used = 0;
    long long index = -1;
    try {
      index = std::stoll(index_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != index_text.size() || index < 0 || static_cast<size_t>(index) >= class_count)
      throw DataError(at + "class index \"" + index_text + "\" is not in [0, " + std::to_string(class_count) +
                      ") (the train split has " + std::to_string(class_count) + " classes)");
    if (!present.count(name)) throw DataError(at + "no image " + (val_dir / name).string());
    const auto [it, inserted] = seen.emplace(name, number);
    if (!inserted)
      throw DataError(at + "\"" + name + "\" is listed again (first on line " + std::to_string(it->second) + ")");
    list.add(name, index);
  }
  if (list.size() == 0) throw DataError(label_file.string() + ": lists no images");
  return list;
}

std::vector<std::string> read_class_names(const fs::path& file, const std::vector<std::string>& wnids) {
  std::ifstream in(file);
  if (!in) throw DataError(file.string() + ": cannot open");
  std::unordered_map<std::string, std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    line = trim_line_end(line);
    const auto space = line.find_first_of(" \t");
    if (space == std::string::npos) continue;
    const auto start = line.find_first_not_of(" \t", space);
    if (start != std::string::npos) names[line.substr(0, space)] = line.substr(start);
  }
  std::vector<std::string> out;
  for (const auto& w : wnids) out.push_back(names.count(w) ? names[w] : w);
  return out;
}

}  // namespace trainer
