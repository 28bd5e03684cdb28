#include "trainer/data/sources/shard_index.hpp"

#include <charconv>
#include <filesystem>

#include "trainer/data/sources/image_folder.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// webdataset's base_plus_ext: the key ends at the first dot after the last slash, so "dir/a.b.jpg" is key "dir/a",
// extension "b.jpg".
bool split_name(const std::string& name, std::string& key, std::string& ext) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return false;
  key = name.substr(0, dot);
  ext = name.substr(dot + 1);
  return !key.empty() && key.back() != '/';
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

bool parse_u64(std::string_view word, uint64_t& value) {
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  return ec == std::errc() && end == word.data() + word.size();
}

}  // namespace

const IndexedMember* IndexedSample::find(std::string_view ext) const {
  for (const IndexedMember& m : members)
    if (m.ext == ext) return &m;
  return nullptr;
}

const IndexedMember* IndexedSample::image() const {
  for (const IndexedMember& m : members)
    if (m.ext.find('.') == std::string::npos && has_image_extension("." + m.ext)) return &m;
  return nullptr;
}

std::vector<IndexedSample> group_samples(const std::vector<TarMember>& members) {
  std::vector<IndexedSample> samples;
  std::string key, ext;
  for (const TarMember& m : members) {
    if (!split_name(m.name, key, ext)) continue;
    if (samples.empty() || samples.back().key != key) samples.push_back({key, {}});
    samples.back().members.push_back({ext, m.offset, m.size});
  }
  return samples;
}

std::vector<IndexedSample> parse_shard_index(std::string_view text, const std::string& where, uint64_t shard_size) {
  size_t line_no = 0;
  auto next_line = [&text, &line_no]() {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_no;
    return line;
  };
  auto fail = [&](const std::string& what) -> DataError {
    return DataError(where + ":" + std::to_string(line_no) + ": " + what);
  };
  const std::vector<std::string_view> head = split_words(next_line());
  uint64_t count = 0;
  if (head.size() != 2 || (head[0] != "v1.2" && head[0] != "v1.1") || !parse_u64(head[1], count))
    throw fail("expected \"v1.2 <samples>\" (DALI's webdataset index), got another first line");
  const size_t per_member = head[0] == "v1.2" ? 4 : 3;
  // Every sample takes a line of at least 6 bytes: a count past that is a lie, caught before any allocation.
  if (count > text.size() / 6 + 1) throw fail("says " + std::to_string(count) + " samples, more than the file holds");
  std::vector<IndexedSample> samples;
  samples.reserve(count);
  while (!text.empty()) {
    const std::vector<std::string_view> words = split_words(next_line());
    if (words.empty()) continue;
    if (samples.size() == count) throw fail("more sample lines than the " + std::to_string(count) + " announced");
    if (words.size() % per_member != 0)
      throw fail("expected groups of " + std::to_string(per_member) + " words (ext offset size" +
                 (per_member == 4 ? " name" : "") + "), got " + std::to_string(words.size()) + " words");
    IndexedSample sample;
    for (size_t w = 0; w < words.size(); w += per_member) {
      IndexedMember m{std::string(words[w]), 0, 0};
      if (!parse_u64(words[w + 1], m.offset) || !parse_u64(words[w + 2], m.size))
        throw fail("offset and size must be whole numbers, got \"" + std::string(words[w + 1]) + "\" and \"" +
                   std::string(words[w + 2]) + "\"");
      if (shard_size != 0 && (m.offset > shard_size || m.size > shard_size - m.offset))
        throw fail("member ." + m.ext + " at " + std::to_string(m.offset) + " (" + std::to_string(m.size) +
                   " bytes) runs past the shard's end at " + std::to_string(shard_size) +
                   " (the index is not this shard's)");
      if (sample.find(m.ext)) throw fail("member ." + m.ext + " appears twice in one sample");
      std::string key = "#" + std::to_string(samples.size()), ext;
      if (per_member == 4) {
        if (!split_name(std::string(words[w + 3]), key, ext) || ext != m.ext)
          throw fail("member name \"" + std::string(words[w + 3]) + "\" does not end in ." + m.ext);
        if (w > 0 && key != sample.key)
          throw fail("names of two samples (" + sample.key + ", " + key + ") on one line");
      }
      sample.key = key;
      sample.members.push_back(std::move(m));
    }
    samples.push_back(std::move(sample));
  }
  if (samples.size() != count)
    throw DataError(where + ": announces " + std::to_string(count) + " samples but lists " +
                    std::to_string(samples.size()));
  return samples;
}

std::string format_shard_index(const std::vector<IndexedSample>& samples) {
  // A name with white space cannot be a word of a v1.2 line: such a shard's index is written as v1.1, without names.
  bool names = true;
  for (const IndexedSample& s : samples)
    for (const IndexedMember& m : s.members)
      if ((s.key + m.ext).find_first_of(" \t\r\n") != std::string::npos) names = false;
  std::string out = (names ? "v1.2 " : "v1.1 ") + std::to_string(samples.size()) + "\n";
  for (const IndexedSample& s : samples) {
    for (size_t m = 0; m < s.members.size(); ++m) {
      const IndexedMember& member = s.members[m];
      out += (m ? " " : "") + member.ext + " " + std::to_string(member.offset) + " " + std::to_string(member.size);
      if (names) out += " " + s.key + "." + member.ext;
    }
    out += "\n";
  }
  return out;
}

bool write_shard_index_beside(const std::string& shard, const std::string& text) {
  try {
    write_text_atomically(std::filesystem::path(shard_index_location(shard)), text);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string shard_index_location(const std::string& shard) {
  const size_t slash = shard.rfind('/');
  const size_t start = slash == std::string::npos ? 0 : slash + 1;
  // DALI's wds2idx looks for the dot from the second character: a name such as ".tar" keeps its dot.
  const size_t dot = shard.find('.', start + 1);
  return (dot == std::string::npos ? shard : shard.substr(0, dot)) + ".idx";
}

}  // namespace trainer
