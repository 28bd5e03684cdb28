#include "trainer/config/data_kinds.hpp"


#include "trainer/util/error.hpp"

namespace trainer {

namespace {

void check_mnist(const Config& c) {
  if (c.data.root.empty())
    throw ConfigError("data.root: expected the folder that holds the MNIST IDX files, got an empty string");
}

void check_imagenet(const Config& c) {
  if (c.data.root.empty())
    throw ConfigError("data.root: expected the folder that holds train/ and val/, got an empty string");
  if (c.model.in_channels != 1 && c.model.in_channels != 3)
    throw ConfigError("model.in_channels: image folders give 1 (grey) or 3 (RGB) channels, got " +
                      std::to_string(c.model.in_channels));
}

void check_synthetic(const Config& c) {
  if (c.data.synthetic.channels != c.model.in_channels)
    throw ConfigError("data.synthetic.channels: expected model.in_channels (" + std::to_string(c.model.in_channels) +
                      "), got " + std::to_string(c.data.synthetic.channels));
}

}  // namespace

const std::vector<DataKindRow>& data_kind_rows() {
  // MNIST's statistics are the usual defaults for grey images, ImageNet's for photographs.
  static const std::vector<DataKindRow> rows{
      {"mnist", DataKind::mnist, {0.1307}, {0.3081}, check_mnist},
      {"imagenet", DataKind::imagenet, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, check_imagenet},
      {"synthetic", DataKind::synthetic, {0.1307}, {0.3081}, check_synthetic},
  };
  return rows;
}

const DataKindRow& data_kind_row(DataKind kind) { return row_of(data_kind_rows(), kind); }

const EnumTable<DataKind>& data_kinds() {
  static const EnumTable<DataKind> table = enum_table_of(data_kind_rows());
  return table;
}

}  // namespace trainer
