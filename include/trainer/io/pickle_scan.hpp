// A pickle's instructions walked without running any of them: every instruction one of Python's (protocols 0-5)
// and every argument inside the bytes, a string's declared length no longer than what follows it. LibTorch's
// unpickler allocates a declared length before it reads the bytes (a 1.5 GB string from a few bytes of a
// checkpoint's debug record), so the pickles of an archive are walked before LibTorch is given it.
//   if (auto problem = pickle_structure_problem(bytes)) throw CheckpointError(file + ": " + *problem);
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace trainer {

// Nullopt when the walk reaches STOP with every argument in bounds; else what is wrong, with its offset.
std::optional<std::string> pickle_structure_problem(std::string_view pickle);

}  // namespace trainer
