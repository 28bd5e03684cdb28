#include "trainer/io/tensorboard.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "trainer/io/tfrecord.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/write_error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// Protocol-buffer wire format: a key is (field << 3 | wire type); 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32; fixed-width values are little-endian.
enum Wire : uint32_t { varint = 0, fixed64 = 1, bytes = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, uint32_t field, Wire wire) { put_varint(out, (field << 3) | wire); }
template <class T>
void put_fixed(std::string& out, uint32_t field, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  put_key(out, field, sizeof(T) == 8 ? fixed64 : fixed32);
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // x86 and ARM are little-endian, as the wire format is
  out.append(reinterpret_cast<const char*>(raw), sizeof(T));
}
void put_bytes(std::string& out, uint32_t field, const std::string& value) {
  put_key(out, field, bytes);
  put_varint(out, value.size());
  out += value;
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_fixed(e, 1, wall_time);
  if (step != 0) {
    put_key(e, 2, varint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool is_event_file(const fs::path& p) { return p.filename().string().rfind("events.out.tfevents.", 0) == 0; }

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string encode_scalars_event(double wall_time, int64_t step, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);
    put_fixed(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

int64_t decode_event_step(const std::string& event) {
  size_t at = 0;
  auto varint_at = [&]() {
    uint64_t v = 0;
    for (int shift = 0; at < event.size() && shift < 64; shift += 7) {
      const auto b = static_cast<unsigned char>(event[at++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (at < event.size()) {
    const uint64_t key = varint_at();
    switch (key & 7) {
      case varint: {
        const uint64_t v = varint_at();
        if ((key >> 3) == 2) return static_cast<int64_t>(v);
        break;
      }
      case fixed64: at += 8; break;
      case fixed32: at += 4; break;
      case bytes: {
        // A length past the event's end ends the walk: added as written, it could wrap `at` around to the start
        // and loop for ever (on --resume, which reads the run's events).
        const uint64_t length = varint_at();
        if (length > event.size() - at) return 0;
        at += static_cast<size_t>(length);
        break;
      }
      default: return 0;  // groups are not used by Event
    }
  }
  return 0;
}

TensorBoardWriter::TensorBoardWriter(const fs::path& dir, std::optional<int64_t> resume_step) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + dir.string() + ": " + ec.message(), 1);
  std::vector<fs::path> earlier;
  if (resume_step)
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && is_event_file(entry.path())) earlier.push_back(entry.path());
  std::sort(earlier.begin(), earlier.end());

  const double wall = now_seconds();
  std::string name = "events.out.tfevents." + std::to_string(static_cast<int64_t>(wall)) + "." + host_name() + "." +
                     std::to_string(process_id());
  file_ = dir / name;
  for (int n = 1; fs::exists(file_) || std::find(earlier.begin(), earlier.end(), file_) != earlier.end(); ++n)
    file_ = dir / (name + "." + std::to_string(n));
  out_.open(file_, std::ios::binary | std::ios::trunc);
  check_written(out_, file_);
  append(encode_file_version_event(wall));
  std::vector<fs::path> folded;
  for (const auto& old : earlier) {
    std::vector<std::string> events;
    try {
      events = read_tfrecords(old);
    } catch (const Error&) {
      continue;  // a damaged file stays as it is: curves must never cost a run its resume
    }
    for (size_t i = 1; i < events.size(); ++i)  // events[0] is the old file's file_version
      if (decode_event_step(events[i]) <= *resume_step) append(events[i]);
    folded.push_back(old);
  }
  out_.flush();
  check_written(out_, file_);
  // The kept events are safely in the new file before the old ones go.
  for (const auto& old : folded) fs::remove(old, ec);
}

void TensorBoardWriter::write_scalars(int64_t step, const Scalars& values) {
  Scalars finite;
  for (const auto& v : values)
    if (!std::isnan(v.second)) finite.push_back(v);
  if (finite.empty()) return;
  append(encode_scalars_event(now_seconds(), step, finite));
  out_.flush();
  check_written(out_, file_);
}

void TensorBoardWriter::append(const std::string& event) {
  const std::string record = tfrecord_frame(event);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

}  // namespace trainer
