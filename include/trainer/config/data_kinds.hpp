// The dataset formats, one row each: the name data.kind takes, the normalisation its images usually get, and
// what its keys must satisfy. The reader behind each kind is the matching row of data/sources.cpp. A new format
// is one DataKind value, one row here, one row there and the file of its ImageSource.
//   const DataKindRow& row = data_kind_row(config.data.kind);
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

struct DataKindRow {
  std::string name;
  DataKind kind;
  std::vector<double> mean;  // data.mean when the config leaves it empty (0..1 scale)
  std::vector<double> std;
  // Throws ConfigError when the config cannot describe this kind of dataset (null: no rules).
  void (*check)(const Config& c) = nullptr;
};

const std::vector<DataKindRow>& data_kind_rows();
const DataKindRow& data_kind_row(DataKind kind);

}  // namespace trainer
