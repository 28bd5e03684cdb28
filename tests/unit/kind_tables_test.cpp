// Every kind of every table has exactly one row: a kind added to an enum without its row fails here, not at run time.
#include <gtest/gtest.h>

#include <set>

#include "trainer/data/pixels/augment_ops.hpp"
#include "trainer/data/pixels/auto_augment.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/optim/schedules.hpp"

namespace trainer {
namespace {

// Each value of the enum's name table (what a config can choose) has exactly one row, and no row has a kind
// without a name.
template <class Row, class E>
void expect_one_row_per_kind(const std::vector<Row>& rows, const EnumTable<E>& names) {
  for (const auto& [name, kind] : names) {
    size_t found = 0;
    for (const auto& row : rows) found += row.kind == kind ? 1 : 0;
    EXPECT_EQ(found, 1u) << name;
  }
  EXPECT_EQ(rows.size(), names.size());
}

TEST(KindTables, EveryDataKindHasOneRow) {
  expect_one_row_per_kind(data_kind_rows(), data_kinds());
  for (const auto& row : data_kind_rows()) {
    EXPECT_TRUE(row.open) << enum_name(data_kinds(), row.kind);
    EXPECT_FALSE(row.mean.empty());
    EXPECT_EQ(row.mean.size(), row.std.size());
  }
}

TEST(KindTables, EveryScheduleHasOneRow) {
  expect_one_row_per_kind(schedule_rows(), schedule_kinds());
  for (const auto& row : schedule_rows()) EXPECT_TRUE(row.lr) << enum_name(schedule_kinds(), row.kind);
}

TEST(KindTables, EveryAugmentationPolicyHasOneRow) {
  expect_one_row_per_kind(policy_rows(), auto_augment_kinds());
  for (const auto& row : policy_rows()) {
    const std::string name = enum_name(auto_augment_kinds(), row.kind);
    if (row.kind == AutoAugmentKind::none) {
      EXPECT_FALSE(row.space || row.choose || row.apply);
      continue;
    }
    // A policy has an op table and either draws single ops or applies itself.
    EXPECT_TRUE(row.space) << name;
    EXPECT_NE(row.choose == nullptr, row.apply == nullptr) << name;
  }
}

TEST(KindTables, EveryAugmentOpHasOneName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kAugmentOpCount; ++i) {
    const std::string& name = op_name(static_cast<AugmentOp>(i));
    EXPECT_FALSE(name.empty()) << "op " << i;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

// Export formats are named by --format and by extension: both must pick exactly one row.
TEST(KindTables, EveryExportFormatHasOneNameAndItsOwnExtensions) {
  std::set<std::string> names, extensions;
  for (const auto& f : export_formats()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_TRUE(f.serialize) << f.name;
    EXPECT_FALSE(f.extensions.empty()) << f.name;
    for (const auto& e : f.extensions) {
      EXPECT_TRUE(extensions.insert(e).second) << e;
      EXPECT_EQ(format_for_output("", "model" + e).name, f.name) << e;
    }
    EXPECT_EQ(format_for_output(f.name, "model.bin").name, f.name);
  }
}

}  // namespace
}  // namespace trainer
