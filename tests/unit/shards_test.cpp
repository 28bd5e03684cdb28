// WebDataset shards: the tar reader against headers as GNU tar, Python's tarfile and the trainer's writer make them
// (and damaged ones), DALI's index format, shard lists, and a split packed from a folder read back sample for
// sample, pixel for pixel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/data/sources/pipe_shard.hpp"
#include "trainer/data/sources/shard_cache.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/shard_list.hpp"
#include "trainer/data/sources/shard_listing.hpp"
#include "trainer/data/sources/shard_source.hpp"
#include "trainer/data/sources/shard_writer.hpp"
#include "trainer/data/sources/tar_members.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::error_of;
using testing::TempDir;
namespace fs = std::filesystem;

// A header edited after it was made, its checksum made again.
std::string resummed(std::string h) {
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<uint8_t>(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

// A header of another type (a GNU long name 'L', a pax record 'x', a folder '5').
std::string typed_header(const std::string& name, uint64_t size, char type) {
  std::string h = ustar_header(name, size);
  h[156] = type;
  return resummed(h);
}

// DataError's message as what() has it.
std::string data_error(const std::string& message) { return "data: " + message; }

// A tar of (header, bytes) members, each padded, with the two end blocks.
std::string tar_of(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string t;
  for (const auto& [header, bytes] : members) t += header + bytes + std::string(tar_padding(bytes.size()), '\0');
  return t + std::string(1024, '\0');
}

std::vector<TarMember> members_of(const std::string& tar) {
  return list_tar_members(reinterpret_cast<const uint8_t*>(tar.data()), tar.size(), "t.tar");
}

TEST(TarMembers, ReadsUstarGnuLongNamesAndPaxPaths) {
  const std::string long_name = std::string(150, 'd') + "/key.jpg";
  const std::string pax = "27 path=dir/a.pax.name.jpg\n";  // 27 bytes, its own length included
  const std::string tar = tar_of({{ustar_header("a.jpg", 5), "hello"},
                                  {ustar_header("a.cls", 1), "3"},
                                  {typed_header("folder/", 0, '5'), ""},
                                  {typed_header("././@LongLink", long_name.size() + 1, 'L'), long_name + '\0'},
                                  {ustar_header("ignored", 2), "ab"},
                                  {typed_header("PaxHeaders/x", pax.size(), 'x'), pax},
                                  {ustar_header("short", 600), std::string(600, 'p')}});
  const auto m = members_of(tar);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].name, "a.jpg");
  EXPECT_EQ(m[0].offset, 512u);
  EXPECT_EQ(tar.substr(m[0].offset, m[0].size), "hello");
  EXPECT_EQ(m[2].name, long_name);
  EXPECT_EQ(tar.substr(m[2].offset, m[2].size), "ab");
  EXPECT_EQ(m[3].name, "dir/a.pax.name.jpg");
  EXPECT_EQ(m[3].size, 600u);
  const auto samples = group_samples(m);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].key, "a");
  ASSERT_EQ(samples[0].members.size(), 2u);
  EXPECT_EQ(samples[0].find("cls")->offset, 1536u);
  EXPECT_EQ(samples[2].key, "dir/a");  // the key ends at the first dot after the last slash
  EXPECT_EQ(samples[2].members[0].ext, "pax.name.jpg");
  // The index written for them reads back the same, and says where every byte is.
  const auto again = parse_shard_index(format_shard_index(samples), "t.idx", tar.size());
  ASSERT_EQ(again.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(again[i].key, samples[i].key);
    ASSERT_EQ(again[i].members.size(), samples[i].members.size());
    for (size_t k = 0; k < samples[i].members.size(); ++k) {
      EXPECT_EQ(again[i].members[k].ext, samples[i].members[k].ext);
      EXPECT_EQ(again[i].members[k].offset, samples[i].members[k].offset);
      EXPECT_EQ(again[i].members[k].size, samples[i].members[k].size);
    }
  }
  // An archive without its end blocks ends at a header boundary, as Python's tarfile accepts.
  EXPECT_EQ(members_of(tar.substr(0, 1024)).size(), 1u);
}

TEST(TarMembers, DamageIsAOneLineErrorNamingTheShardAndOffset) {
  std::string tar = tar_of({{ustar_header("a.jpg", 5), "hello"}, {ustar_header("a.cls", 1), "3"}});
  std::string flipped = tar;
  flipped[1024 + 2] ^= 1;  // a byte of the second header's name
  const unsigned stored = std::stoul(tar.substr(1024 + 148, 6), nullptr, 8);
  EXPECT_EQ(
      error_of<DataError>([&] { members_of(flipped); }),
      data_error("t.tar: tar header at offset 1024: checksum " + std::to_string(stored) + ", but the header sums to " +
                 std::to_string(stored - 1) + " (not a tar file, or a damaged one)"));
  EXPECT_EQ(error_of<DataError>([&] { members_of(tar.substr(0, 1024 + 300)); }),
            data_error("t.tar: tar header at offset 1024: cut short (300 of 512 bytes)"));
  EXPECT_EQ(error_of<DataError>([&] { members_of(tar.substr(0, 514)); }),
            data_error("t.tar: tar header at offset 0: the member's 5 bytes run past the end of the file at 514 (a "
                       "truncated shard)"));
  std::string huge = ustar_header("a.jpg", 0);
  huge[124] = static_cast<char>(0x80);  // GNU base 256: 2^64 - 1 bytes, which no shard holds
  std::memset(&huge[125], 0xff, 11);
  EXPECT_NE(error_of<DataError>([&] {
              members_of(resummed(huge) + std::string(1024, '\0'));
            }).find("does not fit in 64 bits"),
            std::string::npos);
  std::memset(&huge[125], 0, 4);  // 2^56 - 1 bytes
  EXPECT_NE(error_of<DataError>([&] {
              members_of(resummed(huge) + std::string(1024, '\0'));
            }).find("run past the end of the file at 1536 (a truncated shard)"),
            std::string::npos);
  std::string bad_octal = ustar_header("a.jpg", 5);
  bad_octal[126] = '9';
  EXPECT_NE(error_of<DataError>([&] {
              members_of(resummed(bad_octal) + "hello" + std::string(1531, '\0'));
            }).find("the size field is not an octal number"),
            std::string::npos);
  const std::string lying_pax = "99 path=x.jpg\n";
  EXPECT_NE(error_of<DataError>([&] {
              members_of(tar_of({{typed_header("p", lying_pax.size(), 'x'), lying_pax}}));
            }).find("pax record length 99 does not fit its data"),
            std::string::npos);
  EXPECT_EQ(error_of<DataError>([] { ustar_header(std::string(101, 'n'), 1); }),
            data_error("tar member name \"" + std::string(101, 'n') + "\": must be 1 to 100 bytes in a ustar header"));
}

// A tar fed a piece at a time (a remote shard read through without its index) lists what the whole one lists.
std::vector<TarMember> streamed(const std::string& tar, size_t piece) {
  TarMemberStream stream("t.tar");
  for (size_t at = 0; at < tar.size() && !stream.done(); at += piece)
    stream.feed(reinterpret_cast<const uint8_t*>(tar.data()) + at, std::min(piece, tar.size() - at));
  return stream.finish();
}

TEST(TarMembers, FedAPieceAtATimeTheyListTheSameAndRefuseTheSame) {
  const std::string long_name = std::string(150, 'd') + "/key.jpg";
  const std::string pax = "27 path=dir/a.pax.name.jpg\n";
  const std::string tar = tar_of({{ustar_header("a.jpg", 5), "hello"},
                                  {ustar_header("empty.cls", 0), ""},
                                  {typed_header("././@LongLink", long_name.size() + 1, 'L'), long_name + '\0'},
                                  {ustar_header("ignored", 2), "ab"},
                                  {typed_header("PaxHeaders/x", pax.size(), 'x'), pax},
                                  {ustar_header("short", 600), std::string(600, 'p')}});
  const auto whole = members_of(tar);
  ASSERT_EQ(whole.size(), 4u);
  for (size_t piece : {size_t{1}, size_t{7}, size_t{512}, size_t{513}, tar.size()}) {
    const auto m = streamed(tar, piece);
    ASSERT_EQ(m.size(), whole.size()) << piece;
    for (size_t i = 0; i < m.size(); ++i) {
      EXPECT_EQ(m[i].name, whole[i].name) << piece;
      EXPECT_EQ(m[i].offset, whole[i].offset) << piece;
      EXPECT_EQ(m[i].size, whole[i].size) << piece;
    }
    EXPECT_EQ(error_of<DataError>([&] { streamed(tar.substr(0, 514), piece); }),
              data_error("t.tar: tar header at offset 0: the member's 5 bytes run past the end of the file at 514 (a "
                         "truncated shard)"));
    EXPECT_EQ(error_of<DataError>([&] { streamed(tar.substr(0, 1024 + 300), piece); }),
              data_error("t.tar: tar header at offset 1024: cut short (300 of 512 bytes)"));
  }
  // Small members named with the suffix asked for are kept, by the offset of their bytes (their labels).
  const std::string labels = tar_of({{ustar_header("a.jpg", 5), "hello"},
                                     {ustar_header("a.cls", 1), "3"},
                                     {ustar_header("b.cls", 0), ""},
                                     {ustar_header("c.cls", 700), std::string(700, '7')}});
  for (size_t piece : {size_t{1}, size_t{300}, labels.size()}) {
    TarMemberStream keeping("t.tar", ".cls", 512);
    for (size_t at = 0; at < labels.size() && !keeping.done(); at += piece)
      keeping.feed(reinterpret_cast<const uint8_t*>(labels.data()) + at, std::min(piece, labels.size() - at));
    const auto m = keeping.finish();
    ASSERT_EQ(m.size(), 4u);
    EXPECT_EQ(keeping.kept(), (std::map<uint64_t, std::string>{{m[1].offset, "3"}, {m[2].offset, ""}})) << piece;
  }
  // Past the end blocks nothing is read.
  TarMemberStream stream("t.tar");
  stream.feed(reinterpret_cast<const uint8_t*>(tar.data()), tar.size());
  EXPECT_TRUE(stream.done());
  // A long-name or pax record is gathered in memory, so one over 1 MiB (no name is) is refused at its header.
  EXPECT_EQ(error_of<DataError>(
                [&] { members_of(typed_header("././@LongLink", (1 << 20) + 1, 'L') + std::string(1024, '\0')); }),
            data_error("t.tar: tar header at offset 0: a GNU long name or pax record of 1048577 bytes (more than 1 "
                       "MiB)"));
}

TEST(ShardIndex, ReadsDalisVersionsAndRefusesAnIndexThatIsNotTheShards) {
  const auto v12 =
      parse_shard_index("v1.2 2\njpg 512 100 k/a.jpg cls 1024 1 k/a.cls\n\npng 1536 7 b.png\n", "s.idx", 2048);
  ASSERT_EQ(v12.size(), 2u);
  EXPECT_EQ(v12[0].key, "k/a");
  EXPECT_EQ(v12[0].find("cls")->offset, 1024u);
  EXPECT_EQ(v12[1].find("png")->size, 7u);
  const auto v11 = parse_shard_index("v1.1 1\r\njpg 512 100 cls 1024 1\r\n", "s.idx", 0);
  ASSERT_EQ(v11.size(), 1u);
  EXPECT_EQ(v11[0].key, "#0");
  const std::map<std::string, std::string> refused{
      {"v2 1\n", "s.idx:1: expected \"v1.2 <samples>\" (DALI's webdataset index), got another first line"},
      {"v1.2 99999999999\njpg 0 1 a.jpg\n", "s.idx:1: says 99999999999 samples, more than the file holds"},
      {"v1.2 2\njpg 0 1 a.jpg\n", "s.idx: announces 2 samples but lists 1"},
      {"v1.2 1\njpg 0 1 a.jpg\njpg 0 1 b.jpg\n", "s.idx:3: more sample lines than the 1 announced"},
      {"v1.2 1\njpg 0 1\n", "s.idx:2: expected groups of 4 words (ext offset size name), got 3 words"},
      {"v1.2 1\njpg -1 1 a.jpg\n", "s.idx:2: offset and size must be whole numbers, got \"-1\" and \"1\""},
      {"v1.2 1\njpg 2000 100 a.jpg\n",
       "s.idx:2: member .jpg at 2000 (100 bytes) runs past the shard's end at 2048 (the index is not this shard's)"},
      {"v1.2 1\njpg 0 1 a.jpg jpg 5 1 a.jpg\n", "s.idx:2: member .jpg appears twice in one sample"},
      {"v1.2 1\njpg 0 1 a.png\n", "s.idx:2: member name \"a.png\" does not end in .jpg"},
      {"v1.2 1\njpg 0 1 a.jpg cls 1 1 b.cls\n", "s.idx:2: names of two samples (a, b) on one line"},
  };
  for (const auto& [text, message] : refused)
    EXPECT_EQ(error_of<DataError>([&, t = text] { parse_shard_index(t, "s.idx", 2048); }), data_error(message)) << text;
  EXPECT_EQ(shard_index_location("http://h/d.v/train-000001.tar"), "http://h/d.v/train-000001.idx");
  EXPECT_EQ(shard_index_location("data/x.tar.gz"), "data/x.idx");
}

// A cached copy's name: one per address (its query left out, so a presigned address signed again finds the same copy)
// or per command, ending with the shard's own name.
TEST(ShardCache, ACopysNameIsTheAddressDigestAndTheShardsName) {
  const std::string a = shard_copy_name("https://bucket.example/data/train-000001.tar?X-Amz-Signature=aa&X-Amz-Date=1");
  EXPECT_EQ(a, shard_copy_name("https://bucket.example/data/train-000001.tar?X-Amz-Signature=bb&X-Amz-Date=2"));
  EXPECT_EQ(a, shard_copy_name("https://bucket.example/data/train-000001.tar"));
  EXPECT_EQ(a.size(), 24u + std::string("-train-000001.tar").size());
  EXPECT_EQ(a.substr(24), "-train-000001.tar");
  EXPECT_NE(a, shard_copy_name("https://bucket.example/other/train-000001.tar"));
  // A command keeps every character, its shard's name the last .tar word; odd characters become '_'.
  EXPECT_NE(shard_copy_name("pipe:cat a.tar?x"), shard_copy_name("pipe:cat a.tar?y"));
  EXPECT_EQ(shard_copy_name("aws s3 cp 's3://b/tr@in 01.tar' -").substr(24), "-01.tar");
  EXPECT_EQ(shard_copy_name("curl -s https://h/x/v@l-7.tar").substr(24), "-v_l-7.tar");
  EXPECT_EQ(shard_copy_name("make-a-shard").substr(24), ".tar");
}

// pipe: shards copied by several at once (the ranks of one machine; threads here) take turns per shard: the command
// runs once, and every caller gets the one copy, byte for byte.
TEST(ShardCache, PipeCopiesOfOneShardMadeAtOnceRunItsCommandOnce) {
  TempDir dir;
  const fs::path cache = dir / "cache";  // made by the first listing written
  const std::string tar = tar_of({{ustar_header("a.cls", 1), "3"}, {ustar_header("b.cls", 1), "5"}});
  testing::write_text(dir / "shard.tar", tar);
  const std::string location =
      "pipe:sh -c 'echo run >> " + (dir / "runs").string() + "; sleep 0.3; cat " + (dir / "shard.tar").string() + "'";
  std::vector<PipeShardCopy> copies(4);
  std::vector<std::string> errors(copies.size());
  std::vector<std::thread> callers;
  for (size_t i = 0; i < copies.size(); ++i)
    callers.emplace_back([&, i] {
      try {
        copies[i] = pipe_shard_copy(location, {true, (dir / "cache").string()});
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (std::thread& t : callers) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(testing::read_text(dir / "runs"), "run\n");
  EXPECT_EQ(std::count_if(copies.begin(), copies.end(), [](const PipeShardCopy& c) { return c.ran; }), 1);
  for (const PipeShardCopy& copy : copies) {
    EXPECT_EQ(copy.path, copies[0].path);
    EXPECT_EQ(testing::read_text(copy.path), tar);
  }
  EXPECT_TRUE(fs::exists(copies[0].path.string() + ".lock"));
}

// The version of a remote file as its answers' header lines name it: a status line starts an answer anew (a redirect's
// headers are not the file's), names are any case, a weak ETag is none, a range's size is Content-Range's total.
TEST(ShardCache, AnAnswersHeadersNameTheFilesVersion) {
  HttpAnswerHeaders h;
  for (const char* line :
       {"HTTP/1.1 302 Found\r\n", "ETag: \"old\"\r\n", "Content-Length: 5\r\n", "\r\n",
        "HTTP/1.1 206 Partial Content\r\n", "content-range: bytes 0-0/48128\r\n", "eTaG:  \"5f-bc00\" \r\n",
        "Last-Modified: Mon, 07 Dec 2026 10:00:00 GMT\r\n", "Content-Length: 1\r\n", "\r\n"})
    h.add(line);
  const HttpValidators range = h.validators(/*range=*/true);
  EXPECT_EQ(range.size, 48128u);
  EXPECT_EQ(range.etag, "\"5f-bc00\"");
  EXPECT_EQ(range.last_modified, "Mon, 07 Dec 2026 10:00:00 GMT");
  EXPECT_TRUE(range.known());
  EXPECT_EQ(h.validators(/*range=*/false).size, 1u);  // a whole file's size is its Content-Length
  EXPECT_EQ(range.text(), "48128 bytes, ETag \"5f-bc00\", Last-Modified Mon, 07 Dec 2026 10:00:00 GMT");

  HttpAnswerHeaders weak;
  for (const char* line : {"HTTP/2 200\r\n", "etag: W/\"5f\"\r\n", "content-length: 48128\r\n"}) weak.add(line);
  EXPECT_EQ(weak.validators(false).etag, "");
  EXPECT_FALSE(weak.validators(false).known());  // nothing tells this version from another
  HttpAnswerHeaders unknown;
  unknown.add("Content-Range: bytes 0-0/*\r\n");
  EXPECT_EQ(unknown.validators(true).size, 0u);

  // Another version: a field both name that differs. One a range's answer leaves out is no contradiction.
  HttpValidators dateless = range;
  dateless.last_modified.clear();
  EXPECT_FALSE(range.contradicts(dateless));
  HttpValidators moved = range;
  moved.etag = "\"60-bc00\"";
  EXPECT_TRUE(range.contradicts(moved));
  HttpValidators longer = range;
  longer.size += 1;
  EXPECT_TRUE(range.contradicts(longer));
}

// A remote shard's listing (the index and kept labels of a read-through, kept in the cache): read back as written,
// named for the shard's version, and not used when it fails a check.
TEST(ShardCache, AListingReadsBackAsWrittenAndOnlyForItsShardsVersion) {
  TempDir dir;
  const fs::path cache = dir / "cache";  // made by the first listing written
  const std::string tar = tar_of({{ustar_header("a.cls", 1), "3"},
                                  {ustar_header("a.jpg", 700), std::string(700, 'j')},
                                  {ustar_header("b.cls", 2), "12"},
                                  {ustar_header("b.jpg", 5), "jjjjj"}});
  const std::vector<IndexedSample> samples = group_samples(members_of(tar));
  const std::map<uint64_t, std::string> kept{{samples[0].members[0].offset, "3"}, {samples[1].members[0].offset, "12"}};
  const std::string address = "http://host/data/train-000007.tar";
  const HttpValidators version{tar.size(), "\"5f-1a\"", "Mon, 07 Dec 2026 10:00:00 GMT"};
  const fs::path path = shard_listing_path(cache, address, version);
  EXPECT_EQ(path.parent_path(), cache);
  EXPECT_EQ(path.filename().string().substr(24), "-train-000007.listing");
  HttpValidators other = version;
  other.etag = "\"5f-1b\"";
  EXPECT_NE(shard_listing_path(dir.path(), address, other), path);  // another version, another listing
  EXPECT_NE(shard_listing_path(dir.path(), address + "?sig=1", other), path);
  EXPECT_EQ(shard_listing_path(dir.path(), address + "?sig=2", other), shard_listing_path(dir.path(), address, other));

  EXPECT_FALSE(read_shard_listing(path, address, tar.size()).has_value());  // none yet
  ASSERT_TRUE(write_shard_listing(path, samples, kept));
  const auto listing = read_shard_listing(path, address, tar.size());
  ASSERT_TRUE(listing.has_value());
  EXPECT_EQ(format_shard_index(listing->samples), format_shard_index(samples));
  EXPECT_EQ(listing->kept, kept);

  // Not used: an index past the shard's end (a shorter shard), a damaged file, a kept member the index does not list.
  const IndexedMember& last = samples.back().members.back();
  EXPECT_TRUE(read_shard_listing(path, address, last.offset + last.size).has_value());
  EXPECT_FALSE(read_shard_listing(path, address, last.offset + last.size - 1).has_value());
  const std::string written = testing::read_text(path);
  for (const size_t at : {size_t{3}, size_t{520}, written.size() / 2}) {
    std::string damaged = written;
    damaged[at] ^= 0x5a;
    testing::write_text(dir / "damaged.listing", damaged);
    EXPECT_FALSE(read_shard_listing(dir / "damaged.listing", address, tar.size()).has_value()) << at;
  }
  testing::write_text(dir / "cut.listing", written.substr(0, 700));
  EXPECT_FALSE(read_shard_listing(dir / "cut.listing", address, tar.size()).has_value());
  ASSERT_TRUE(write_shard_listing(dir / "stray.listing", samples, {{1, "3"}}));
  EXPECT_FALSE(read_shard_listing(dir / "stray.listing", address, tar.size()).has_value());
  ASSERT_TRUE(write_shard_listing(dir / "none.listing", samples, {}));  // labels known elsewhere: nothing kept
  EXPECT_TRUE(read_shard_listing(dir / "none.listing", address, tar.size()).value().kept.empty());
}

TEST(ShardList, BracePatternsListFilesAndFolders) {
  EXPECT_EQ(expand_braces("a-{000..002}.tar"), (std::vector<std::string>{"a-000.tar", "a-001.tar", "a-002.tar"}));
  EXPECT_EQ(expand_braces("{x,y}-{9..10}"), (std::vector<std::string>{"x-9", "x-10", "y-9", "y-10"}));
  EXPECT_EQ(expand_braces("plain.tar"), std::vector<std::string>{"plain.tar"});
  EXPECT_EQ(error_of<ConfigError>([] { expand_braces("a-{1..3"); }), "config: a-{1..3: a '{' without its '}'");
  EXPECT_EQ(error_of<ConfigError>([] { expand_braces("a-{3..1}"); }),
            "config: a-{3..1}: the range {3..1} runs backwards");
  EXPECT_EQ(error_of<ConfigError>([] { expand_braces("{0..999}{0..999}{0..9}"); }),
            "config: {0..999}{0..999}{0..9}: stands for more than a million shards");
  EXPECT_EQ(error_of<ConfigError>([] { expand_braces("{a..b}"); }),
            "config: {a..b}: a brace range is two whole numbers, as {000000..000127}; got {a..b}");
  EXPECT_EQ(shard_location("https://h/d/", "t-0.tar"), "https://h/d/t-0.tar");
  EXPECT_EQ(shard_location("https://h/d", "t-0.tar"), "https://h/d/t-0.tar");
  EXPECT_EQ(shard_location("/data", "https://other/t.tar"), "https://other/t.tar");
  TempDir dir;
  fs::create_directories(dir / "s");
  for (const char* name : {"s/b.tar", "s/a.tar", "s/a.idx"}) testing::write_text(dir / name, "");
  EXPECT_EQ(list_shards(dir.path().string(), "s"),
            (std::vector<std::string>{(dir / "s/a.tar").generic_string(), (dir / "s/b.tar").generic_string()}));
  testing::write_text(dir / "s/list.txt", "# mine\nb.tar\r\n\n/abs/c.tar\n");
  EXPECT_EQ(list_shards(dir.path().string(), "s/list.txt"),
            (std::vector<std::string>{(dir / "s/b.tar").generic_string(), "/abs/c.tar"}));
  EXPECT_NE(
      error_of<DataError>([&] { list_shards(dir.path().string(), "none.txt"); }).find("cannot read the shard list"),
      std::string::npos);
}

DataConfig shard_config(const fs::path& root) {
  DataConfig d;
  d.kind = DataKind::shards;
  d.root = root.string();
  d.augment.image_size = 24;
  d.augment.eval_resize = 28;
  return d;
}

// The folder's splits packed as `trainer shards make` packs them, 3 samples to a shard or so.
void pack(const fs::path& folder, const fs::path& dest) {
  DataConfig d = shard_config(folder);
  ShardWriter writer(dest, 3 * 1536 + 2000);
  for (const bool train : {true, false}) {
    const auto split = open_image_folder(d, train, 0, 3, false);
    writer.begin_split(train ? "train" : "val");
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < split->size(); ++i) {
      split->read_encoded(i, bytes);
      writer.add("k" + std::to_string(i), train && i % 2 ? "png" : "jpg", bytes, split->label(i));
    }
  }
  writer.finish({"n0", "n1", "n2"});
}

// How many train shards pack() wrote.
size_t train_shards(const fs::path& dest) {
  size_t n = 0;
  while (fs::exists(dest / ("train-00000" + std::to_string(n) + ".tar"))) ++n;
  return n;
}

TEST(ShardSource, APackedFolderGivesTheFoldersSamplesPixelForPixel) {
  TempDir dir;
  testing::write_image_folder(dir / "folder");
  pack(dir / "folder", dir / "shards");
  for (const bool train : {true, false}) {
    const auto folder = open_image_folder(shard_config(dir / "folder"), train, 0, 3);
    const auto shards = open_shards(shard_config(dir / "shards"), train, 0, 3);
    ASSERT_EQ(shards->size(), folder->size());
    EXPECT_EQ(shards->class_names(), (std::vector<std::string>{"n0", "n1", "n2"}));
    for (size_t i = 0; i < folder->size(); ++i) {
      EXPECT_EQ(shards->label(i), folder->label(i));
      const Sample a = folder->read(i, {7, 2}), b = shards->read(i, {7, 2});
      EXPECT_EQ(cv::norm(a.image, b.image, cv::NORM_INF), 0) << i;
    }
  }
  const size_t n = train_shards(dir / "shards");
  EXPECT_GT(n, 2u);
  const auto shards = open_shards(shard_config(dir / "shards"), true, 0, 3);
  EXPECT_NE(shards->describe().find("(" + std::to_string(n) + " shards, 12 images, 3 classes; random resized crop 24"),
            std::string::npos)
      << shards->describe();
  EXPECT_EQ(shards->sample_name(0), (dir / "shards/train-000000.tar").generic_string() + "#k0");
  EXPECT_EQ(shards->sample_name(11),
            (dir / ("shards/train-00000" + std::to_string(n - 1) + ".tar")).generic_string() + "#k11");
}

TEST(ShardSource, ALocalShardWithoutIndexIsReadAndIndexedAndLabelsComeFromMembers) {
  TempDir dir;
  testing::write_image_folder(dir / "folder");
  pack(dir / "folder", dir / "shards");
  const std::string idx = testing::read_text(dir / "shards/train-000001.idx");
  fs::remove(dir / "shards/train-000001.idx");
  fs::remove(dir / "shards/shards.json");  // labels from the .cls members, classes counted from them
  DataConfig d = shard_config(dir / "shards");
  d.shards.train = "train-{000000..00000" + std::to_string(train_shards(dir / "shards") - 1) + "}.tar";
  const auto shards = open_shards(d, true, 0, 3);
  ASSERT_EQ(shards->size(), 12u);
  EXPECT_EQ(testing::read_text(dir / "shards/train-000001.idx"), idx);
  EXPECT_EQ(shards->class_names(), (std::vector<std::string>{"0", "1", "2"}));
  const auto folder = open_image_folder(shard_config(dir / "folder"), true, 0, 3);
  for (size_t i = 0; i < folder->size(); ++i) EXPECT_EQ(shards->label(i), folder->label(i));
  // model.num_classes 2 numbers the classes of shards without a summary: a sample of class 2 is outside them.
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 2, 3); }),
            "data: " + (dir / "shards/train-000004.tar").generic_string() + "#k8: label 2 outside the 2 classes");
}

TEST(ShardSource, BadShardsAreOneLineErrorsNamingTheShardAndSample) {
  TempDir dir;
  testing::write_image_folder(dir / "folder");
  pack(dir / "folder", dir / "shards");
  DataConfig d = shard_config(dir / "shards");
  const std::string shard = (dir / "shards/train-000000.tar").generic_string();
  // An index that is not the shard's.
  testing::write_text(dir / "shards/train-000000.idx", "v1.2 1\njpg 512 999999 k0.jpg cls 1024 1 k0.cls\n");
  EXPECT_NE(error_of<DataError>([&] { open_shards(d, true, 0, 3); }).find("train-000000.idx:2: member .jpg at 512"),
            std::string::npos);
  // A sample without a label member, and one with a label out of range (no summary to take labels from).
  fs::remove(dir / "shards/shards.json");
  d.shards.train = "train-000000.tar";
  testing::write_text(dir / "shards/train-000000.idx", "v1.2 1\njpg 512 100 k0.jpg\n");
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 0, 3); }),
            "data: " + shard + "#k0: no .cls member for its label; the sample has .jpg");
  const std::string tar = testing::read_text(dir / "shards/train-000000.tar");
  const auto samples = group_samples(members_of(tar));
  const uint64_t cls_at = samples[0].find("cls")->offset;
  testing::write_text(dir / "shards/train-000000.idx",
                      "v1.2 1\njpg 512 100 k0.jpg cls " + std::to_string(cls_at) + " 1 k0.cls\n");
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 5, 3); }).find("label"), std::string::npos);  // 0 < 5
  d.shards.label = "json:label";
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 0, 3); }),
            "data: " + shard + "#k0: no .json member for its label; the sample has .jpg, .cls");
  d.shards.label = "cls";
  testing::write_text(dir / "shards/train-000000.idx", "v1.2 1\ncls " + std::to_string(cls_at) + " 1 k0.cls\n");
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 0, 3); }),
            "data: " + shard + "#k0: no image member (.jpg, .jpeg, .png, .webp, ...); the sample has .cls");
  // An image member larger than any image (an index is checked against a local shard's size first; a remote one's
  // is not, so the cap is what stops it): here a shard made large enough, sparse.
  testing::write_text(dir / "shards/train-000000.idx", "v1.2 1\njpg 512 600000000 k0.jpg cls 1024 1 k0.cls\n");
  fs::resize_file(dir / "shards/train-000000.tar", 600001024);
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 0, 3); }),
            "data: " + shard +
                "#k0: an image member of 600000000 bytes (more than 512 MiB, larger than any image the "
                "decoders take)");
  fs::resize_file(dir / "shards/train-000000.tar", tar.size());
  // A truncated shard without an index.
  fs::remove(dir / "shards/train-000000.idx");
  testing::write_text(dir / "shards/train-000000.tar", tar.substr(0, 700));
  EXPECT_EQ(error_of<DataError>([&] { open_shards(d, true, 0, 3); }),
            "data: " + shard + ": tar header at offset 0: the member's " + std::to_string(samples[0].members[0].size) +
                " bytes run past the end of the file at 700 (a truncated shard)");
  d.shards.train = "missing-{0..1}.tar";
  EXPECT_NE(error_of<DataError>([&] { open_shards(d, true, 0, 3); }).find("missing-0.tar: cannot open the shard: "),
            std::string::npos);
}

}  // namespace
}  // namespace trainer
