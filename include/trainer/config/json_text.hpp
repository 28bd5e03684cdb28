// JSON text from outside (a config, a checkpoint's saved config, a safetensors header, an export's metadata, a
// metrics line) parsed with its nesting bounded. nlohmann parses iteratively, but dump(), which every error
// message that shows a value calls, and a value's destruction recurse: 500,000 nested `[` (1 MB) overflow the
// stack on the way to a one-line error.
//   json j = parse_json(text);                        // throws json::parse_error, as json::parse does
//   json k = parse_json(text, nullptr, false);        // k.is_discarded() when not JSON or too deep
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace trainer {

// Deeper than any JSON this trainer reads (a config nests 3 deep, a safetensors header 3).
inline constexpr int kMostJsonNesting = 64;

// json::parse(text, callback, allow_exceptions), refusing values nested more than kMostJsonNesting deep: a
// json::parse_error ("nested more than 64 deep") when exceptions are allowed, a discarded value otherwise.
// `callback`, when given, sees every event as json::parse's would.
nlohmann::json parse_json(std::string_view text, const nlohmann::json::parser_callback_t& callback = nullptr,
                          bool allow_exceptions = true);

}  // namespace trainer
