// The read loop both halves of read_file (files.hpp) share; each passes its one system read call.
//   return read_all(size_reported, bytes, [&](uint8_t* buffer, size_t room, size_t& got) { ...; return ec; });
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <system_error>
#include <vector>

namespace trainer {

// Reads at most `room` bytes into `buffer`, setting `got` (0 at the end of the file); an error stops the loop.
using ReadCall = std::function<std::error_code(uint8_t* buffer, size_t room, size_t& got)>;

// The whole file into `bytes`: straight into the vector up to the size the system reported (every training image
// comes through here, so no copy), past it through a small buffer (a file that grew meanwhile), and cut to what
// was read (a file that shrank).
std::error_code read_all(size_t size_reported, std::vector<uint8_t>& bytes, const ReadCall& read);

}  // namespace trainer
