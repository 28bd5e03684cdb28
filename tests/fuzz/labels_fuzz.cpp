// The two text files an ImageNet-layout folder may hold (data/sources/image_folder.hpp): val_label.txt, up to the
// input's first NUL byte, against a val folder of three images and three classes; and the class-name file after it.
#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/image_folder.hpp"

TRAINER_FUZZ_TARGET(labels) {
  const auto& scratch = trainer::fuzz::scratch();
  const auto val_dir = scratch.path() / "val";
  if (!std::filesystem::exists(val_dir)) {
    std::filesystem::create_directories(val_dir);
    for (const char* name : {"a.JPEG", "b.JPEG", "c d.JPEG"}) scratch.write(std::string("val/") + name, "x");
  }
  const auto parts = trainer::fuzz::split(data, size, '\0', 2);
  const auto labels = scratch.write("val_label.txt", parts[0]);
  trainer::fuzz::refused_cleanly([&] { trainer::read_val_labels(labels, val_dir, 3); });
  const auto names = scratch.write("synsets.txt", parts.size() > 1 ? parts[1] : "");
  trainer::fuzz::refused_cleanly([&] { trainer::read_class_names(names, {"n01440764", "n01443537", "x"}); });
  return 0;
}
