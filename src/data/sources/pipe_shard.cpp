#include "trainer/data/sources/pipe_shard.hpp"

#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "trainer/data/sources/shard_cache.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/tar_members.hpp"
#include "trainer/platform/child_process.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPipePrefix = "pipe:";

}  // namespace

bool is_pipe_address(const std::string& location) { return location.rfind(kPipePrefix, 0) == 0; }

PipeShardCopy pipe_shard_copy(const std::string& location, const PipeShards& pipes) {
  if (!pipes.allowed)
    throw DataError(location +
                    ": a shard read by running a command; give --allow-pipe to run it (only for a config "
                    "you trust: a config that names a command runs it with your rights)");
  if (pipes.cache.empty())
    throw DataError(location + ": data.shards.cache is empty: pipe: shards are copied into a cache folder");
  const std::string command = location.substr(std::string(kPipePrefix).size());
  const fs::path folder = fs::path(pipes.cache);
  PipeShardCopy copy{folder / shard_copy_name(command), false};
  std::error_code ec;
  if (fs::is_regular_file(copy.path, ec)) return copy;  // copied by an earlier start
  fs::create_directories(folder, ec);
  if (ec) throw DataError(location + ": cannot create the shard cache " + folder.string() + ": " + ec.message());
  // Processes opening the same shard at once (the ranks of one machine) take turns, so that its command runs once:
  // one that waited finds the copy made. The lock is the shard's own, not the folder's, so an opening's parallel
  // copies of different shards still run together; where the file system has no locks, each runs the command.
  FileLock turn;
  bool held = false;
  // Held by another: wait (a command takes far longer than a poll). An error (no locks there) ends the wait too.
  while (!turn.try_lock(copy.path.string() + ".lock", held) && !held)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (fs::is_regular_file(copy.path, ec)) return copy;

  TarMemberStream tar(location);
  std::vector<TarMember> members;
  uint64_t bytes = 0;
  try {
    write_file_atomically(copy.path, [&](const ByteSink& sink) {
      ChildExit exit;
      try {
        exit = run_shell_command(command, [&](const uint8_t* data, size_t size) {
          sink(data, size);
          bytes += size;
          if (!tar.done()) tar.feed(data, size);  // after the end blocks, padding
        });
      } catch (const std::runtime_error& e) {
        throw DataError(location + ": " + e.what());
      }
      if (exit.code != 0)
        throw DataError(location + ": the command " + exit.how + " after " + std::to_string(bytes) +
                        " bytes of output (a pipe: shard is the output of a command that succeeds)");
      if (bytes == 0) throw DataError(location + ": the command wrote nothing (a pipe: shard is its output)");
      members = tar.finish();  // a tar cut short is refused before the copy counts
    });
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {  // the copy could not be written (WriteError names the file, the cause, the space)
    throw DataError(location + ": " + e.message());
  }
  copy.ran = true;
  // The index, made from the bytes as they came (a copy left without one, by a crash here, gets it at its next
  // opening as any local shard does).
  write_shard_index_beside(copy.path.string(), format_shard_index(group_samples(members)));
  return copy;
}

}  // namespace trainer
