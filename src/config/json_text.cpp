#include "trainer/config/json_text.hpp"

#include <string>

namespace trainer {

using nlohmann::json;

json parse_json(std::string_view text, const json::parser_callback_t& callback, bool allow_exceptions) {
  // The callback drops what lies deeper than the bound (the parser still reads it, iteratively, and keeps none of
  // it), and the flag turns the parse into an error.
  bool too_deep = false;
  const json::parser_callback_t bounded = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMostJsonNesting) {
      too_deep = true;
      return false;
    }
    return callback ? callback(depth, event, parsed) : true;
  };
  json j = json::parse(text.begin(), text.end(), bounded, allow_exceptions);
  if (!too_deep) return j;
  if (!allow_exceptions) return json(json::value_t::discarded);
  throw json::parse_error::create(
      101, 0, "syntax error: values nested more than " + std::to_string(kMostJsonNesting) + " deep", nullptr);
}

}  // namespace trainer
