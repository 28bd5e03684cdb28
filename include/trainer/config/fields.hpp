// The field table that every config struct declares once, in visit():
//   template <class V> void visit(V& v) {
//     v.field("lr", lr, "base learning rate", Range::greater_than(0));
//     v.choice("kind", kind, schedule_kinds(), "schedule after warmup");
//     v.section("run", run);
//   }
// The same table drives reading (json_fields.hpp), writing the resolved config and the JSON Schema (schema.hpp),
// so the parser, the saved config and the docs cannot drift apart. Its text is the key's one description.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

// Allowed interval for a number; an empty bound is unbounded.
struct Range {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;

  static Range any() { return {}; }
  static Range at_least(double lo) { return {lo, std::nullopt, false}; }
  static Range greater_than(double lo) { return {lo, std::nullopt, true}; }
  static Range between(double lo, double hi) { return {lo, hi, false}; }
};

// Names of an enum's values, in the order they are listed in error messages.
template <class E>
using EnumTable = std::vector<std::pair<std::string, E>>;

// A setting that is on, off, or decided for the run's device ("auto"). JSON takes true, false or "auto": the
// names "true" and "false" of any table are read from and written as JSON booleans.
enum class Switch { automatic, on, off };
inline const EnumTable<Switch>& switch_values() {
  static const EnumTable<Switch> table{{"auto", Switch::automatic}, {"true", Switch::on}, {"false", Switch::off}};
  return table;
}
inline bool is_boolean_name(const std::string& name) { return name == "true" || name == "false"; }
// Likewise a name of digits ("0") is a JSON integer.
inline bool is_integer_name(const std::string& name) {
  return !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
}

// The name of `value` in its table (every enum value has one row).
template <class E>
const std::string& enum_name(const EnumTable<E>& table, E value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  throw std::logic_error("enum value without a name in its table");
}

// Component tables (data kinds, schedules, augmentation policies) are rows keyed by an enum `kind`: the row of a
// kind. Every kind has exactly one row (each table's test checks it against the enum's name table).
template <class Row, class E>
const Row& row_of(const std::vector<Row>& rows, E kind) {
  for (const auto& row : rows)
    if (row.kind == kind) return row;
  throw std::logic_error("enum value without a row in its table");
}

// The table's names in order: the choices of a config key or a command-line option.
template <class E>
std::vector<std::string> enum_names(const EnumTable<E>& table) {
  std::vector<std::string> names;
  for (const auto& row : table) names.push_back(row.first);
  return names;
}

}  // namespace trainer
