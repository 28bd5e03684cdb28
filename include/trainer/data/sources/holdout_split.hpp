// data.val_fraction: a validation split held out of a class-folder training set (my_photos/<class>/*.jpg), for
// users who have no val/ folder. Stratified: each class gives round(fraction x its images), at least 1 and at
// most all but 1. Which ones is a pure function of data.split_seed and the file names (run.seed plays no part),
// so the split is the same for every run, rank and worker count; a run records its choice in data.val_files
// (config.resolved.json and every checkpoint), and resume, `trainer eval` and export take that list as it is.
//   std::vector<std::string> held = choose_holdout(files, class_names, 0.1, seed);
//   HoldoutLists lists = split_holdout(files, held, folder);   // lists.train, lists.val: disjoint
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/data/sources/image_folder.hpp"

namespace trainer {

// The held-out files (paths relative to the folder, as in `files`), in file-list order. Throws DataError naming a
// class with fewer than 2 images (it cannot be in both splits).
std::vector<std::string> choose_holdout(const FileList& files, const std::vector<std::string>& class_names,
                                        double fraction, int64_t seed);

struct HoldoutLists {
  FileList train;  // every file not held out
  FileList val;    // the held-out files, labelled as in `files`
};

// Throws DataError naming `folder` when a held-out file is no longer in it (the split a run recorded would no
// longer hold) or is named twice.
HoldoutLists split_holdout(const FileList& files, const std::vector<std::string>& held_out,
                           const std::filesystem::path& folder);

}  // namespace trainer
