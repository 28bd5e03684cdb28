// An HTTP answer's header lines as libcurl hands them to the remote shard reader (util/http_range.hpp), one per line
// of the input: the validators that name the file's version (size, ETag, Last-Modified). Any bytes are taken without
// an error; a weak ETag is never kept and the text of what was taken always forms.
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "trainer/util/http_range.hpp"

TRAINER_FUZZ_TARGET(http_headers) {
  trainer::HttpAnswerHeaders headers;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0; at < input.size();) {
    const size_t end = input.find('\n', at);
    const size_t next = end == std::string_view::npos ? input.size() : end + 1;
    headers.add(input.substr(at, next - at));
    at = next;
  }
  for (const bool range : {false, true}) {
    const trainer::HttpValidators v = headers.validators(range);
    if (v.etag.rfind("W/", 0) == 0) std::abort();
    if (v.known() && v.size == 0) std::abort();
    (void)v.text();
  }
  return 0;
}
