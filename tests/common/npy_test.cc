#include "hedgedb/npy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sanitizer.h"
#include "temp_dir.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadBytes;
using testing_util::WriteBytes;

class NpyTest : public testing_util::TempDirTest {
 protected:
  // A file with the given version, header dict text and data, the header
  // padded with spaces and '\n' to `align` bytes, built independently of the
  // writer under test.
  static std::string RawNpy(int major, const std::string& dict, const std::string& data,
                            size_t align = 64) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    const size_t prefix = 8 + len_bytes;
    std::string header = dict;
    while ((prefix + header.size() + 1) % align != 0) header += ' ';
    header += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < len_bytes; ++i)
      out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return out + header + data;
  }

  Status WriteRawAndRead(const std::string& bytes, NpyArray* array) {
    const std::string path = Path("raw.npy");
    WriteBytes(path, bytes);
    return ReadNpy(path, array);
  }
};

std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

template <typename T>
NpyArray MakeTyped(NpyType type, const std::vector<T>& values, std::vector<int64_t> shape) {
  EXPECT_EQ(sizeof(T), static_cast<size_t>(NpyElementSize(type)));
  return MakeNpy(type, values.data(), std::move(shape));
}

template <typename T>
std::vector<T> ExtremeValues() {
  using L = std::numeric_limits<T>;
  return {L::lowest(), L::max(), T(0), T(1), T(L::max() / 3), T(L::lowest() / 7)};
}

TEST_F(NpyTest, RoundTripsEveryDtype) {
  const std::vector<int64_t> shape = {2, 3};
  const std::vector<NpyArray> arrays = {
      MakeTyped(NpyType::kFloat32, std::vector<float>{-1.5f, 0.f, 3.25f, 1e30f, -1e-30f, 7.f},
                shape),
      MakeTyped(NpyType::kFloat64, std::vector<double>{-1.5, 0., 3.25, 1e300, -1e-300, 7.}, shape),
      MakeTyped(NpyType::kInt8, ExtremeValues<int8_t>(), shape),
      MakeTyped(NpyType::kUInt8, ExtremeValues<uint8_t>(), shape),
      MakeTyped(NpyType::kInt16, ExtremeValues<int16_t>(), shape),
      MakeTyped(NpyType::kUInt16, ExtremeValues<uint16_t>(), shape),
      MakeTyped(NpyType::kInt32, ExtremeValues<int32_t>(), shape),
      MakeTyped(NpyType::kUInt32, ExtremeValues<uint32_t>(), shape),
      MakeTyped(NpyType::kInt64, ExtremeValues<int64_t>(), shape),
      MakeTyped(NpyType::kUInt64, ExtremeValues<uint64_t>(), shape),
  };
  for (const NpyArray& original : arrays) {
    SCOPED_TRACE(NpyDescr(original.type));
    const std::string path = Path("a.npy");
    ASSERT_TRUE(WriteNpy(path, original).ok());
    NpyArray loaded;
    const Status s = ReadNpy(path, &loaded);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(loaded.type, original.type);
    EXPECT_EQ(loaded.shape, original.shape);
    EXPECT_EQ(loaded.bytes, original.bytes);
    // Header is aligned to 64 bytes, data follows it exactly.
    const std::string file = ReadBytes(path);
    EXPECT_EQ((file.size() - original.bytes.size()) % 64, 0u);
  }
}

TEST_F(NpyTest, RoundTripsScalarEmptyAndHigherRankShapes) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{}, {0}, {0, 5}, {7}, {2, 3, 4}, {1, 1, 1, 1, 2}}) {
    SCOPED_TRACE(NpyShapeString(shape));
    NpyArray original;
    original.shape = shape;
    std::vector<float> values(static_cast<size_t>(original.element_count()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3.f;
    original = MakeNpy(values, shape);
    const std::string path = Path("s.npy");
    ASSERT_TRUE(WriteNpy(path, original).ok());
    NpyArray loaded;
    ASSERT_TRUE(ReadNpy(path, &loaded).ok());
    EXPECT_EQ(loaded.shape, shape);
    EXPECT_EQ(loaded.bytes, original.bytes);
  }
}

TEST_F(NpyTest, HeaderMatchesNumpySaveByteForByte) {
  // numpy.save(np.arange(12, dtype='<f4').reshape(3, 4)): 128-byte prefix,
  // header length 118 (0x76).
  std::vector<float> values(12);
  for (int i = 0; i < 12; ++i) values[i] = static_cast<float>(i);
  ASSERT_TRUE(WriteNpy(Path("f4.npy"), MakeNpy(values, {3, 4})).ok());
  const std::string expected_f4 = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" +
                                  std::string(58, ' ') + "\n" + FloatBytes(values);
  ASSERT_EQ(expected_f4.size(), 128u + 48u);
  EXPECT_EQ(ReadBytes(Path("f4.npy")), expected_f4);

  // numpy.save(np.arange(5, dtype='<i8')).
  const std::vector<int64_t> ids = {0, 1, 2, 3, 4};
  ASSERT_TRUE(WriteNpy(Path("i8.npy"), MakeNpy(ids, {5})).ok());
  const std::string expected_i8_prefix =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
      "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }" + std::string(60, ' ') + "\n";
  ASSERT_EQ(expected_i8_prefix.size(), 128u);
  EXPECT_EQ(ReadBytes(Path("i8.npy")).substr(0, 128), expected_i8_prefix);

  // numpy.save(np.zeros(4, dtype='|u1')).
  const uint8_t zeros[4] = {0, 0, 0, 0};
  ASSERT_TRUE(WriteNpy(Path("u1.npy"), MakeNpy(NpyType::kUInt8, zeros, {4})).ok());
  EXPECT_EQ(ReadBytes(Path("u1.npy")),
            std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }" + std::string(60, ' ') +
                "\n" + std::string(4, '\0'));

  // numpy >= 1.24 leaves room for the first dimension to grow to 21 digits
  // (20 spaces here, since it is "0"), which pushes this header past 128 bytes
  // to 192 (header length 182 = 0xb6).
  ASSERT_TRUE(WriteNpy(Path("wide.npy"), MakeNpy(std::vector<float>{},
                                                 {0, 123456789012345678, 123456789012345678, 1}))
                  .ok());
  const std::string wide_dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 123456789012345678, "
      "123456789012345678, 1), }";
  ASSERT_EQ(wide_dict.size(), 99u);
  EXPECT_EQ(ReadBytes(Path("wide.npy")),
            std::string("\x93NUMPY\x01\x00\xb6\x00", 10) + wide_dict + std::string(82, ' ') + "\n");

  // numpy.save(np.float64(2.5)): 0-d arrays have no growth axis.
  const double scalar = 2.5;
  ASSERT_TRUE(WriteNpy(Path("scalar.npy"), MakeNpy(NpyType::kFloat64, &scalar, {})).ok());
  const std::string scalar_file = ReadBytes(Path("scalar.npy"));
  EXPECT_EQ(scalar_file.substr(0, 128),
            std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') +
                "\n");
  EXPECT_EQ(scalar_file.size(), 136u);
}

TEST_F(NpyTest, WriteIsAtomicAndReplacesExistingFile) {
  const std::string path = Path("x.npy");
  ASSERT_TRUE(WriteNpy(path, MakeNpy(std::vector<float>{1, 2, 3}, {3})).ok());
  ASSERT_TRUE(WriteNpy(path, MakeNpy(std::vector<float>{4, 5}, {2})).ok());
  NpyArray loaded;
  ASSERT_TRUE(ReadNpy(path, &loaded).ok());
  EXPECT_EQ(loaded.shape, std::vector<int64_t>{2});
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(NpyTest, WriteRejectsSizeMismatchAndBadDirectory) {
  Status s = WriteNpy(Path("bad.npy"), MakeNpy(std::vector<float>{1, 2, 3}, {2, 2}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(2, 2)"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(Path("bad.npy")));

  s = WriteNpy(Path("no/such/dir/x.npy"), MakeNpy(std::vector<float>{1}, {1}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir/x.npy"), std::string::npos) << s.message();
}

TEST_F(NpyTest, ReadsVersion2And3AndLegacyPadding) {
  const std::vector<float> values = {1.f, -2.f, 3.5f, 0.25f};
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  for (int major : {1, 2, 3}) {
    SCOPED_TRACE(major);
    NpyArray a;
    const Status s = WriteRawAndRead(RawNpy(major, dict, FloatBytes(values)), &a);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
    std::vector<float> out;
    ASSERT_TRUE(NpyToFloat32(a, "a", &out).ok());
    EXPECT_EQ(out, values);
  }
  // Old numpy aligned to 16 bytes, key order and quoting vary between writers,
  // Python 2 wrote longs as 2L.
  NpyArray a;
  Status s = WriteRawAndRead(
      RawNpy(1, "{\"shape\": (2L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}",
             FloatBytes(values), 16),
      &a);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
}

TEST_F(NpyTest, AcceptsAnyByteOrderMarkForOneByteTypes) {
  for (const char* descr : {"|i1", "=i1", "i1", "<u1", "|u1", "=u1", "u1", ">u1"}) {
    SCOPED_TRACE(descr);
    NpyArray a;
    const Status s = WriteRawAndRead(
        RawNpy(1,
               std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (3,), }",
               "\x01\x02\xff"),
        &a);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<int64_t> out;
    ASSERT_TRUE(NpyToInt64(a, "a", &out).ok());
    EXPECT_EQ(out[0], 1);
    EXPECT_EQ(out[2], descr[std::strlen(descr) - 2] == 'i' ? -1 : 255);
  }
}

struct BadHeaderCase {
  const char* dict;
  const char* expected_text;  // must appear in the error message
};

TEST_F(NpyTest, RejectsUnsupportedAndMalformedHeaders) {
  const std::string data16(16, '\0');
  const BadHeaderCase cases[] = {
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", "big-endian"},
      {"{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", "big-endian"},
      {"{'descr': '=f4', 'fortran_order': False, 'shape': (2, 2), }", "little-endian"},
      {"{'descr': 'f4', 'fortran_order': False, 'shape': (2, 2), }", "little-endian"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", "fortran_order"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "object"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", "unsupported dtype"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (8,), }", "unsupported dtype"},
      {"{'descr': '|b1', 'fortran_order': False, 'shape': (16,), }", "unsupported dtype"},
      {"{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (4,), }", "structured"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
      {"{'fortran_order': False, 'shape': (4,)}", "no 'descr'"},
      {"{'descr': '<f4', 'shape': (4,)}", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", "'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", "duplicate"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, }", "'shape'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (4,), }", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } x", "after the header"},
      {"['descr', '<f4']", "not a dict"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (4,), }", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "overflows"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 2), }",
       "too large"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dict);
    NpyArray a;
    const Status s = WriteRawAndRead(RawNpy(1, c.dict, data16), &a);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.expected_text), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(Path("raw.npy")), std::string::npos) << s.message();
  }
}

TEST_F(NpyTest, RejectsTruncatedAndTrailingDataAndBadFiles) {
  const std::string path = Path("t.npy");
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(WriteNpy(path, MakeNpy(values, {2, 3})).ok());
  const std::string good = ReadBytes(path);
  NpyArray a;

  WriteBytes(path, good.substr(0, good.size() - 1));
  Status s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated data"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_NE(s.message().find("(2, 3)"), std::string::npos) << s.message();

  WriteBytes(path, good + "garbage");
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trailing bytes"), std::string::npos) << s.message();

  WriteBytes(path, good.substr(0, 40));  // cut inside the header
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated .npy header"), std::string::npos) << s.message();

  WriteBytes(path, good.substr(0, 5));
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a .npy file"), std::string::npos) << s.message();

  WriteBytes(path, "x,y\n1,2\n" + std::string(200, '0'));
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a .npy file"), std::string::npos) << s.message();

  std::string bad_version = good;
  bad_version[6] = 4;
  WriteBytes(path, bad_version);
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("version 4.0"), std::string::npos) << s.message();

  s = ReadNpy(Path("missing.npy"), &a);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find(Path("missing.npy")), std::string::npos) << s.message();

  s = ReadNpy(dir_, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_), std::string::npos) << s.message();

  // A corrupt length field that points past the end of the file.
  std::string long_header = good;
  long_header[8] = '\xff';
  long_header[9] = '\x7f';
  WriteBytes(path, long_header);
  s = ReadNpy(path, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated .npy header"), std::string::npos) << s.message();
}

// Reads `bytes` through a pipe, as from `hedgedb ... --vec <(producer)`.
Status ReadThroughPipe(const std::string& bytes, NpyArray* array) {
  int fds[2];
  if (::pipe(fds) != 0) return Status::IOError("pipe");
  std::thread writer([&] {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t w = ::write(fds[1], bytes.data() + off, bytes.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    ::close(fds[1]);
  });
  const Status s = ReadNpy("/dev/fd/" + std::to_string(fds[0]), array);
  // Drain whatever the reader left so the writer can finish.
  char sink[4096];
  while (::read(fds[0], sink, sizeof(sink)) > 0) {
  }
  writer.join();
  ::close(fds[0]);
  return s;
}

TEST_F(NpyTest, ReadsPipesWithTheSameChecks) {
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(WriteNpy(Path("p.npy"), MakeNpy(values, {250, 4})).ok());
  const std::string good = ReadBytes(Path("p.npy"));
  NpyArray a;
  Status s = ReadThroughPipe(good, &a);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(a.shape, (std::vector<int64_t>{250, 4}));
  std::vector<float> out;
  ASSERT_TRUE(NpyToFloat32(a, "p", &out).ok());
  EXPECT_EQ(out, values);

  s = ReadThroughPipe(good.substr(0, good.size() - 4), &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated data"), std::string::npos) << s.message();
  s = ReadThroughPipe(good + "x", &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trailing bytes"), std::string::npos) << s.message();
  s = ReadThroughPipe(good.substr(0, 50), &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated .npy header"), std::string::npos) << s.message();
  s = ReadThroughPipe("", &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a .npy file"), std::string::npos) << s.message();
}

// A stream whose header declares 6.4 GB but holds 100 bytes fails as
// truncated without allocating what the header says: the child process has an
// address-space limit of 4 GiB, under which that allocation would abort it.
TEST_F(NpyTest, PipeHeaderCannotMakeTheReaderAllocate) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000, 16), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header + std::string(100, '\0');
  if (testing_util::kSanitized) {
    GTEST_SKIP() << "a sanitizer maps terabytes of shadow memory, above any address-space limit";
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = rlim_t(4) << 30;
    ::setrlimit(RLIMIT_AS, &limit);
    NpyArray a;
    const Status s = ReadThroughPipe(bytes, &a);
    ::_exit(!s.ok() && s.message().find("truncated data") != std::string::npos ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the reader died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(NpyTest, ToFloat32ConvertsFloatsOnly) {
  const std::vector<double> doubles = {1.5, -2.25, 1e-3, std::nan("")};
  std::vector<float> out;
  ASSERT_TRUE(NpyToFloat32(MakeTyped(NpyType::kFloat64, doubles, {4}), "means", &out).ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.25f);
  EXPECT_EQ(out[2], static_cast<float>(1e-3));
  // Conversion does not validate values: the database does.
  EXPECT_TRUE(std::isnan(out[3]));

  const Status s = NpyToFloat32(MakeNpy(std::vector<int32_t>{1, 2}, {2}), "means", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("means"), std::string::npos);
  EXPECT_NE(s.message().find("<i4"), std::string::npos) << s.message();
}

// float64 -> float32 refuses what float32 cannot hold, naming the value as
// given (1e-50, not the 0 it would become); infinities and NaN pass through
// for the database to judge (a logp of -inf is valid).
TEST_F(NpyTest, ToFloat32RefusesValuesOutsideFloatRange) {
  std::vector<float> out;
  for (const auto& [value, becomes] : std::vector<std::pair<double, std::string>>{
           {1e-50, "0"}, {-1e-46, "0"}, {1e39, "an infinity"}}) {
    const Status s = NpyToFloat32(
        MakeTyped(NpyType::kFloat64, std::vector<double>{0.5, value}, {2}), "var", &out);
    ASSERT_TRUE(s.IsInvalidArgument()) << value;
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    EXPECT_EQ(s.message(), "var: element 1 (" + std::string(text) +
                               ") is outside float32's range (it would be stored as " + becomes +
                               ")");
  }
  const std::vector<double> edge = {1e-45, -3.4e38, -INFINITY, 0.0, -0.0};  // 1e-45: subnormal
  ASSERT_TRUE(NpyToFloat32(MakeTyped(NpyType::kFloat64, edge, {5}), "x", &out).ok());
  EXPECT_GT(out[0], 0.0f);
  EXPECT_EQ(out[2], -INFINITY);
}

// NpyToInt32 (codes) is NpyToInt64 then int32's range; NpyTypeOf maps NumPy
// dtype kinds and sizes to the types the conversions take, and nothing else.
TEST_F(NpyTest, ToInt32AndNpyTypeOf) {
  std::vector<int32_t> out;
  ASSERT_TRUE(NpyToInt32(MakeTyped(NpyType::kFloat64, std::vector<double>{3, -2147483648.0}, {2}),
                         "codes", &out)
                  .ok());
  EXPECT_EQ(out, (std::vector<int32_t>{3, INT32_MIN}));
  Status s =
      NpyToInt32(MakeNpy(std::vector<int64_t>{1, (int64_t(1) << 32) + 1}, {2}), "codes", &out);
  EXPECT_EQ(s.message(), "codes: element 1 (4294967297) does not fit in int32");
  s = NpyToInt32(MakeTyped(NpyType::kFloat32, std::vector<float>{1.5f}, {1}), "codes", &out);
  EXPECT_EQ(s.message(),
            "codes: element 0 (1.5) is not an integer in int64's range; expected an integer array");
  NpyType t;
  EXPECT_TRUE(NpyTypeOf('u', 8, &t) && t == NpyType::kUInt64);
  EXPECT_TRUE(NpyTypeOf('f', 4, &t) && t == NpyType::kFloat32);
  EXPECT_TRUE(NpyTypeOf('i', 1, &t) && t == NpyType::kInt8);
  for (const auto& [kind, size] : std::vector<std::pair<char, int>>{
           {'b', 1}, {'f', 2}, {'c', 8}, {'O', 8}, {'U', 4}, {'i', 16}, {'f', 0}}) {
    EXPECT_FALSE(NpyTypeOf(kind, size, &t)) << kind << size;
  }
}

// The Python binding's integer arguments: a NumPy buffer by dtype kind and
// item size, through the same conversions; other dtypes are refused naming
// the argument and the dtype as NumPy prints it.
TEST_F(NpyTest, BufferConversionsTakeWhatNpyFilesTake) {
  std::vector<int64_t> wide;
  const uint16_t u2[] = {0, 65535};
  ASSERT_TRUE(BufferToInt64('u', 2, u2, 2, "ids", "uint16", &wide).ok());
  EXPECT_EQ(wide, (std::vector<int64_t>{0, 65535}));
  const uint64_t big[] = {uint64_t(1) << 63};
  Status s = BufferToInt64('u', 8, big, 1, "ids", "uint64", &wide);
  EXPECT_EQ(s.message(), "ids: element 0 (9223372036854775808) does not fit in int64");
  const bool flags[] = {true, false};
  s = BufferToInt64('b', 1, flags, 2, "ids", "bool", &wide);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "ids: expected an integer array, got dtype bool");
  std::vector<int32_t> narrow;
  const double f8[] = {3.0, 2.5};
  s = BufferToInt32('f', 8, f8, 2, "codes", "float64", &narrow);
  EXPECT_EQ(s.message(),
            "codes: element 1 (2.5) is not an integer in int64's range; expected an integer array");
  ASSERT_TRUE(BufferToInt32('f', 8, f8, 1, "codes", "float64", &narrow).ok());
  EXPECT_EQ(narrow, std::vector<int32_t>{3});
  ASSERT_TRUE(BufferToInt32('i', 4, nullptr, 0, "codes", "int32", &narrow).ok());
  EXPECT_TRUE(narrow.empty());
}

TEST_F(NpyTest, ToInt64ConvertsEveryIntegerTypeAndIntegralFloats) {
  std::vector<int64_t> out;
  ASSERT_TRUE(
      NpyToInt64(MakeTyped(NpyType::kInt8, std::vector<int8_t>{-128, 127}, {2}), "ids", &out).ok());
  EXPECT_EQ(out, (std::vector<int64_t>{-128, 127}));
  ASSERT_TRUE(
      NpyToInt64(MakeTyped(NpyType::kUInt16, std::vector<uint16_t>{65535}, {1}), "ids", &out).ok());
  EXPECT_EQ(out, std::vector<int64_t>{65535});
  ASSERT_TRUE(
      NpyToInt64(MakeTyped(NpyType::kUInt32, std::vector<uint32_t>{4294967295u}, {1}), "ids", &out)
          .ok());
  EXPECT_EQ(out, std::vector<int64_t>{4294967295});
  ASSERT_TRUE(
      NpyToInt64(MakeTyped(NpyType::kUInt64, std::vector<uint64_t>{9223372036854775807ull}, {1}),
                 "ids", &out)
          .ok());
  EXPECT_EQ(out, std::vector<int64_t>{std::numeric_limits<int64_t>::max()});
  ASSERT_TRUE(
      NpyToInt64(MakeTyped(NpyType::kFloat64, std::vector<double>{3, -4, 0}, {3}), "ids", &out)
          .ok());
  EXPECT_EQ(out, (std::vector<int64_t>{3, -4, 0}));

  Status s = NpyToInt64(
      MakeTyped(NpyType::kUInt64, std::vector<uint64_t>{9223372036854775808ull}, {1}), "ids", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.message();
  s = NpyToInt64(MakeTyped(NpyType::kFloat32, std::vector<float>{1.f, 2.5f}, {2}), "labels", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("labels: element 1"), std::string::npos) << s.message();
  s = NpyToInt64(MakeTyped(NpyType::kFloat64, std::vector<double>{std::nan("")}, {1}), "ids", &out);
  EXPECT_FALSE(s.ok());
  s = NpyToInt64(MakeTyped(NpyType::kFloat64, std::vector<double>{1e19}, {1}), "ids", &out);
  EXPECT_FALSE(s.ok());
}

TEST(NpyHelpers, ShapeStringsAndSizes) {
  EXPECT_EQ(NpyShapeString({}), "()");
  EXPECT_EQ(NpyShapeString({3}), "(3,)");
  EXPECT_EQ(NpyShapeString({3, 4, 5}), "(3, 4, 5)");
  EXPECT_EQ(NpyElementSize(NpyType::kUInt8), 1);
  EXPECT_EQ(NpyElementSize(NpyType::kInt16), 2);
  EXPECT_EQ(NpyElementSize(NpyType::kFloat32), 4);
  EXPECT_EQ(NpyElementSize(NpyType::kUInt64), 8);
  EXPECT_STREQ(NpyDescr(NpyType::kInt8), "|i1");
  EXPECT_STREQ(NpyDescr(NpyType::kFloat64), "<f8");
}

}  // namespace
}  // namespace hedgedb
