#include "trainer/util/atomic_file.hpp"

#include <string>
#include <vector>

#include "trainer/platform/files.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/write_error.hpp"

namespace trainer {

void write_file_atomically(const std::filesystem::path& path, const std::function<void(const ByteSink&)>& produce) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Joined as paths, not strings: a name in any script survives on Windows whatever its code page.
  std::filesystem::path name = ".";
  name += path.filename();
  name += ".tmp" + std::to_string(process_id());
  const auto temp = dir / name;
  // Removes the temporary file unless it was committed (declared first: it runs after the file is closed).
  struct RemoveUnlessCommitted {
    const std::filesystem::path& path;
    bool committed = false;
    ~RemoveUnlessCommitted() {
      if (!committed) remove_file(path);
    }
  } cleanup{temp};
  OutputFile out;
  remove_file(temp);  // one a crashed run of the same process id left; create() takes a new file only
  if (const auto ec = out.create(temp)) throw write_failure(path, ec);

  // The sink never fails: after the first failed write it only counts, and the failure is raised once the
  // producer is done. LibTorch's zip writer, handed a sink that throws, throws again from its destructor and
  // aborts the process (a full disk used to end a run with "terminate called" and a stack trace).
  std::error_code failure;
  uint64_t produced = 0;
  const ByteSink sink = [&](const void* data, size_t size) -> size_t {
    produced += size;
    if (!failure) failure = out.write(data, size);
    return size;
  };
  produce(sink);
  if (failure) throw write_failure(path, failure, produced);
  if (const auto ec = out.flush_to_disk()) throw write_failure(path, ec, produced);
  if (const auto ec = out.close()) throw write_failure(path, ec, produced);
  if (const auto ec = replace_file(temp, path)) throw write_failure(path, ec);
  cleanup.committed = true;
}

void link_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::path temp = to;
  temp += ".link";
  remove_file(temp);
  if (!hard_link(from, temp) && !replace_file(temp, to)) return;
  remove_file(temp);
  // No hard links here: a copy, read whole through the platform layer (long paths, any script; checkpoints are
  // read whole when loaded too).
  std::vector<uint8_t> bytes;
  if (const auto ec = read_file(from, bytes)) throw write_failure(to, ec);
  write_file_atomically(to, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

}  // namespace trainer
