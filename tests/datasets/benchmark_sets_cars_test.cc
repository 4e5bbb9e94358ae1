// ReadCars196 on cars_annos.mat fixtures written with libmatio in the official
// layout (a struct array `annotations` and a cell array `class_names`).
#include <gtest/gtest.h>
#include <matio.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "datasets/benchmark_sets.h"
#include "datasets/image_set.h"
#include "temp_dir.h"

namespace hedgedb {
namespace datasets {
namespace {

namespace fs = std::filesystem;

// One annotation; numbers are written with the given MATLAB classes.
struct Annotation {
  std::string path;
  double x1, y1, x2, y2;
  double class_id;
  matio_classes box_class = MAT_C_DOUBLE;
  matio_classes class_class = MAT_C_UINT8;
};

struct MatLayout {
  bool annotations = true;
  bool class_names = true;
  bool column = false;          // N x 1 instead of 1 x N
  std::string omit_field;       // a field the struct does not have
  bool path_as_number = false;  // relative_im_path of annotation 1 is a double
  bool wide_bbox_x1 = false;    // bbox_x1 of annotation 1 is 1 x 2
  // zlib-compressed class_names (as MATLAB's default -v7 writes). The struct
  // stays uncompressed: matio 1.5.23 writes compressed structs corruptly
  // (tbeu/matio#251).
  bool compress_class_names = false;
};

matvar_t* Scalar(matio_classes cls, double value) {
  size_t dims[2] = {1, 1};
  switch (cls) {
    case MAT_C_UINT8: {
      uint8_t v = static_cast<uint8_t>(value);
      return Mat_VarCreate(nullptr, cls, MAT_T_UINT8, 2, dims, &v, 0);
    }
    case MAT_C_UINT16: {
      uint16_t v = static_cast<uint16_t>(value);
      return Mat_VarCreate(nullptr, cls, MAT_T_UINT16, 2, dims, &v, 0);
    }
    case MAT_C_INT32: {
      int32_t v = static_cast<int32_t>(value);
      return Mat_VarCreate(nullptr, cls, MAT_T_INT32, 2, dims, &v, 0);
    }
    case MAT_C_SINGLE: {
      float v = static_cast<float>(value);
      return Mat_VarCreate(nullptr, cls, MAT_T_SINGLE, 2, dims, &v, 0);
    }
    default: {
      double v = value;
      return Mat_VarCreate(nullptr, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, dims, &v, 0);
    }
  }
}

// 8-bit chars for paths; 16-bit (as MATLAB writes them) for class names.
matvar_t* Chars(const std::string& text, bool utf16 = false) {
  size_t dims[2] = {1, text.size()};
  if (!utf16) {
    return Mat_VarCreate(nullptr, MAT_C_CHAR, MAT_T_UINT8, 2, dims, const_cast<char*>(text.data()),
                         0);
  }
  std::vector<uint16_t> units(text.begin(), text.end());
  return Mat_VarCreate(nullptr, MAT_C_CHAR, MAT_T_UINT16, 2, dims, units.data(), 0);
}

std::string ClassName(int id) { return "Maker Model " + std::to_string(id); }

// Writes `path` as a MAT5 file; false (with a test failure) if matio fails.
bool WriteCarsMat(const std::string& path, const std::vector<Annotation>& annos,
                  const MatLayout& layout = MatLayout()) {
  mat_t* mat = Mat_CreateVer(path.c_str(), nullptr, MAT_FT_MAT5);
  if (mat == nullptr) {
    ADD_FAILURE() << "Mat_CreateVer " << path;
    return false;
  }
  bool ok = true;
  if (layout.annotations) {
    std::vector<const char*> fields;
    for (const char* f :
         {"relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"}) {
      if (layout.omit_field != f) fields.push_back(f);
    }
    size_t dims[2] = {1, annos.size()};
    if (layout.column) std::swap(dims[0], dims[1]);
    matvar_t* s = Mat_VarCreateStruct("annotations", 2, dims, fields.data(),
                                      static_cast<unsigned>(fields.size()));
    for (size_t i = 0; i < annos.size(); ++i) {
      const Annotation& a = annos[i];
      auto set = [&](const char* name, matvar_t* v) {
        // Setting a field the struct lacks returns nullptr without taking `v`.
        if (layout.omit_field == name) {
          Mat_VarFree(v);
        } else {
          Mat_VarFree(Mat_VarSetStructFieldByName(s, name, i, v));
        }
      };
      set("relative_im_path",
          i == 0 && layout.path_as_number ? Scalar(MAT_C_DOUBLE, 1) : Chars(a.path));
      if (i == 0 && layout.wide_bbox_x1) {
        size_t wide[2] = {1, 2};
        double xs[2] = {a.x1, a.x1};
        set("bbox_x1", Mat_VarCreate(nullptr, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, wide, xs, 0));
      } else {
        set("bbox_x1", Scalar(a.box_class, a.x1));
      }
      set("bbox_y1", Scalar(a.box_class, a.y1));
      set("bbox_x2", Scalar(a.box_class, a.x2));
      set("bbox_y2", Scalar(a.box_class, a.y2));
      set("class", Scalar(a.class_class, a.class_id));
      set("test", Scalar(MAT_C_UINT8, static_cast<double>(i % 2)));
    }
    ok = Mat_VarWrite(mat, s, MAT_COMPRESSION_NONE) == 0;
    Mat_VarFree(s);
  }
  if (ok && layout.class_names) {
    size_t dims[2] = {1, 196};
    matvar_t* cell = Mat_VarCreate("class_names", MAT_C_CELL, MAT_T_CELL, 2, dims, nullptr, 0);
    for (int c = 1; c <= 196; ++c) Mat_VarSetCell(cell, c - 1, Chars(ClassName(c), true));
    ok = Mat_VarWrite(mat, cell,
                      layout.compress_class_names ? MAT_COMPRESSION_ZLIB : MAT_COMPRESSION_NONE) ==
         0;
    Mat_VarFree(cell);
  }
  Mat_Close(mat);
  if (!ok) ADD_FAILURE() << "Mat_VarWrite " << path;
  return ok;
}

class CarsTest : public testing_util::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(fs::path(dir_) / "car_ims");
    // 16 x 12 images: they only need to exist and decode.
    const std::vector<float> pixels(3 * 12 * 16, 0.5f);
    for (const Annotation& a : Official()) {
      ASSERT_TRUE(WriteImageFile(Path(a.path), pixels.data(), 3, 12, 16).ok());
    }
  }
  std::string MatPath() const { return Path("cars_annos.mat"); }

  // Classes 1 and 98 (train) and 99 and 196 (test), interleaved; mixed
  // numeric classes as in files written by different tools.
  static std::vector<Annotation> Official() {
    std::vector<Annotation> a(4);
    a[0] = {"car_ims/000001.jpg", 1, 1, 10, 8, 1};
    a[1] = {"car_ims/000002.jpg", 3, 2, 16, 12, 99, MAT_C_UINT16, MAT_C_DOUBLE};
    a[2] = {"car_ims/000003.jpg", 5, 4, 5, 4, 98, MAT_C_INT32, MAT_C_INT32};
    a[3] = {"car_ims/000004.jpg", 2, 3, 9, 11, 196, MAT_C_SINGLE, MAT_C_UINT16};
    return a;
  }

  // Reads a fixture expected to be rejected; returns the error.
  Status ReadBad(const std::vector<Annotation>& annos, const MatLayout& layout) {
    if (!WriteCarsMat(MatPath(), annos, layout)) return Status::Internal("fixture");
    ImageSource source;
    const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("cars_annos.mat"), std::string::npos) << s.ToString();
    EXPECT_TRUE(source.entries.empty());
    return s;
  }
  // The bytes of a valid file of Official() annotations.
  std::string OfficialBytes() const {
    EXPECT_TRUE(WriteCarsMat(MatPath(), Official()));
    std::ifstream in(MatPath(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Writes `bytes` as the annotations file, which must be refused before
  // matio allocates what a damaged size claims.
  void ExpectRefusedAsOversized(const std::string& bytes) {
    std::ofstream(MatPath(), std::ios::binary | std::ios::trunc) << bytes;
    ImageSource source;
    const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find("holds a malformed element"), std::string::npos) << s.ToString();
    EXPECT_EQ(source.size(), 0);
  }
};

TEST_F(CarsTest, CarsSplitsAreClassDisjointInFileOrder) {
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official()));
  const std::string abs_dir = fs::absolute(dir_).lexically_normal().string();

  ImageSource train, test, all;
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kTrain, &train).ok());
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kTest, &test).ok());
  const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &all);
  ASSERT_TRUE(s.ok()) << s.ToString();

  ASSERT_EQ(train.size(), 2);
  EXPECT_EQ(train.entries[0].label, 1);
  EXPECT_EQ(train.entries[1].label, 98);
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(test.entries[0].label, 99);
  EXPECT_EQ(test.entries[1].label, 196);
  ASSERT_EQ(all.size(), 4);
  const std::vector<int64_t> labels = {1, 99, 98, 196};
  for (int i = 0; i < 4; ++i) {
    const ImageEntry& e = all.entries[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(e.path, abs_dir + "/car_ims/00000" + std::to_string(i + 1) + ".jpg");
    EXPECT_EQ(e.idx_index, -1);
    EXPECT_TRUE(e.has_label);
    EXPECT_EQ(e.label, labels[i]);
    EXPECT_EQ(e.label_name, ClassName(static_cast<int>(labels[i])));
    EXPECT_TRUE(e.has_box);
  }
  EXPECT_EQ(train.entries[1].path, all.entries[2].path);
  EXPECT_EQ(test.entries[0].path, all.entries[1].path);
  // 1-based inclusive (x1, y1, x2, y2) -> 0-based (x, y, width, height).
  auto box = [](const ImageEntry& e) {
    return std::vector<double>{e.box.x, e.box.y, e.box.width, e.box.height};
  };
  EXPECT_EQ(box(all.entries[0]), (std::vector<double>{0, 0, 10, 8}));
  EXPECT_EQ(box(all.entries[1]), (std::vector<double>{2, 1, 14, 11}));
  EXPECT_EQ(box(all.entries[2]), (std::vector<double>{4, 3, 1, 1}));
  EXPECT_EQ(box(all.entries[3]), (std::vector<double>{1, 2, 8, 9}));
}

TEST_F(CarsTest, CarsColumnArrayWithoutClassNamesUsesIds) {
  MatLayout layout;
  layout.column = true;
  layout.class_names = false;
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official(), layout));
  ImageSource test;
  const Status s = ReadCars196(dir_ + "/", BenchmarkSplit::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(test.entries[0].label_name, "99");
  EXPECT_EQ(test.entries[1].label_name, "196");
  EXPECT_EQ(test.entries[0].path,
            fs::absolute(Path("car_ims/000002.jpg")).lexically_normal().string());
}

TEST_F(CarsTest, CarsRejectsAnEmptySplitAndPathsOutsideTheRoot) {
  std::vector<Annotation> train_only = Official();
  train_only.erase(train_only.begin() + 3);
  train_only.erase(train_only.begin() + 1);
  ASSERT_TRUE(WriteCarsMat(MatPath(), train_only));
  ImageSource source;
  Status s = ReadCars196(dir_, BenchmarkSplit::kTest, &source);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("no Cars-196 images in the test split (classes 99-196)"),
            std::string::npos)
      << s.ToString();
  // The error names the classes the file holds and the option for subsets
  // (the reader's class_split; the CLI names its flag).
  EXPECT_NE(s.message().find("classes 1-98"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("class_split K trains on classes 1..K"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.ToString();
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kTrain, &source).ok());
  // A class split moves the boundary: classes 1..K train, the others test.
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kTest, &source, 50).ok());
  ASSERT_EQ(source.size(), 1);
  EXPECT_EQ(source.entries[0].label, 98);
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kTrain, &source, 50).ok());
  ASSERT_EQ(source.size(), 1);
  EXPECT_EQ(source.entries[0].label, 1);
  for (int64_t bad : {-1, 196, 500}) {
    s = ReadCars196(dir_, BenchmarkSplit::kTest, &source, bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad << ": " << s.ToString();
    EXPECT_NE(s.message().find("class_split must be in [1, 195]"), std::string::npos)
        << s.ToString();
    EXPECT_EQ(s.message().find("--"), std::string::npos) << s.ToString();
  }

  std::vector<Annotation> escaping = Official();
  escaping[2].path = "../outside.jpg";
  s = ReadBad(escaping, MatLayout());
  EXPECT_NE(s.message().find("annotation 3"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("not inside"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsMissingRootOrFileIsNotFound) {
  ImageSource source;
  Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);  // no .mat yet
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(MatPath()), std::string::npos) << s.ToString();

  s = ReadCars196(Path("no_such_root"), BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(Path("no_such_root")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("cars_annos.mat"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsRejectsAFileThatIsNotMat) {
  std::ofstream(MatPath()) << "relative_im_path,class\ncar_ims/000001.jpg,1\n";
  ImageSource source;
  const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(MatPath()), std::string::npos) << s.ToString();
}

// Found by fuzzing (fuzz/cars_fuzzer.cc): 55 bytes that matio's v4 reader
// takes for a variable with a 2 GB name, which it allocated. Files without a
// v5 header are refused before matio opens them.
TEST_F(CarsTest, CarsRefusesFilesThatAreNotVersion5BeforeMatioReadsThem) {
  const unsigned char v4[55] = {0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7f, 0x7f,
                                0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
                                0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  std::ofstream(MatPath(), std::ios::binary).write(reinterpret_cast<const char*>(v4), sizeof(v4));
  ImageSource source;
  Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("not a MATLAB v5 MAT file"), std::string::npos) << s.ToString();
  // A v5-style header with another version (7.3 files are HDF5) is named.
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official()));
  std::fstream f(MatPath(), std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(124);
  f.put(0).put(2);  // little-endian 0x0200
  f.close();
  s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("version 2.0"), std::string::npos) << s.ToString();
}

// Found by fuzzing (fuzz/cars_fuzzer.cc): a struct field whose data tag
// claims ~1 GB inside a small uncompressed variable; matio allocated and
// zeroed it (a minute per read). Nested elements must fit their parent.
TEST_F(CarsTest, CarsRejectsANestedElementLargerThanItsVariable) {
  std::string bytes = OfficialBytes();
  // The char data of the second path: its tag (type, size) precedes it.
  const size_t at = bytes.find("car_ims/000002.jpg");
  ASSERT_NE(at, std::string::npos);
  ASSERT_GE(at, 8u);
  const char huge[4] = {0x12, 0x34, 0x00, 0x39};  // little-endian 0x39003412
  bytes.replace(at - 4, 4, huge, 4);
  ExpectRefusedAsOversized(bytes);
}

// Found by fuzzing: dimensions claiming billions of struct elements in a
// small variable made matio's Mat_VarReadInfo allocate 5.6 GB.
TEST_F(CarsTest, CarsRejectsDimensionsLargerThanTheVariable) {
  std::string bytes = OfficialBytes();
  // dims data (2 x int32), the name's tag, then "annotations".
  const size_t at = bytes.find("annotations");
  ASSERT_NE(at, std::string::npos);
  ASSERT_GE(at, 16u);
  const char huge[4] = {char(0xff), char(0xff), char(0xff), 0x7f};
  bytes.replace(at - 12, 4, huge, 4);  // the second dimension
  ExpectRefusedAsOversized(bytes);
}

// Found by fuzzing: a matrix shorter than its flags and dimensions tag.
// matio reads the dimensions anyway, from the bytes after the matrix, here
// a small element claiming 2^29 + 1 doubles: it allocated 4 GB before failing.
TEST_F(CarsTest, CarsRejectsAMatrixTooShortForItsDimensions) {
  std::string bytes(116, ' ');
  bytes.replace(0, 10, "MATLAB 5.0");
  bytes.append(8, '\0');                  // subsystem data offset
  bytes += std::string("\x00\x01IM", 4);  // version 0x0100, little-endian
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  };
  u32(14), u32(16);                    // miMATRIX of 16 bytes: the array flags only
  u32(6), u32(8);                      // miUINT32 flags
  u32(6), u32(0);                      // class double
  u32(4u << 16 | 5), u32(0x20000001);  // read as the dimensions: [2^29 + 1]
  u32(1), u32(16);                     // read as the name
  bytes.append("annotations");
  bytes.append(5, '\0');
  ExpectRefusedAsOversized(bytes);
}

// Found by fuzzing: the (empty) name of a class_names cell retyped from
// miINT8 to an 8-byte miINT32. matio takes such a name as absent and reads
// the next tag from its bytes: here a size of 0xff00001a, which it allocated
// sign-extended (2^64 - 16M bytes).
TEST_F(CarsTest, CarsRejectsAMatrixNameThatIsNotInt8) {
  std::string bytes = OfficialBytes();
  const size_t names = bytes.find("class_names");
  ASSERT_NE(names, std::string::npos);
  const std::string empty_name("\x01\0\0\0\0\0\0\0", 8);
  const size_t at = bytes.find(empty_name, names);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 8, std::string("\x05\0\0\0\x08\0\0\0", 8));
  bytes[at + 15] = '\xff';  // the top byte of the data tag's size
  ExpectRefusedAsOversized(bytes);
}

// Found by fuzzing: class_names' array flags retyped to claim 0x2908 bytes,
// which hid its cells from the element walk, and a cell whose dimensions tag
// claimed ~4 GB: matio reads the flags as 8 bytes whatever the tag says,
// reached the cell and asked for 8 GB.
TEST_F(CarsTest, CarsRejectsArrayFlagsOfAnotherSize) {
  std::string bytes = OfficialBytes();
  const size_t names = bytes.find("class_names");
  ASSERT_NE(names, std::string::npos);
  // The flags tag of class_names: the first miUINT32 tag before its name.
  const std::string flags_tag("\x06\0\0\0\x08\0\0\0", 8);
  const size_t flags = bytes.rfind(flags_tag, names);
  ASSERT_NE(flags, std::string::npos);
  bytes[flags + 5] = '\x29';  // size 0x2908
  ExpectRefusedAsOversized(bytes);
}

// Found by fuzzing: a struct field (a path) with an 11-byte name. matio
// skips a field's name tag without its data, so it read the name's padding
// as the data tag and asked for 2^64 - 7M bytes.
TEST_F(CarsTest, CarsRejectsAStructFieldWithAName) {
  std::string bytes = OfficialBytes();
  const size_t path = bytes.find("car_ims/000002.jpg");
  ASSERT_NE(path, std::string::npos);
  // The field's empty name tag (miINT8, 0 bytes) just before its data tag.
  const size_t name = bytes.rfind(std::string("\x01\0\0\0\0\0\0\0", 8), path);
  ASSERT_NE(name, std::string::npos);
  ASSERT_GT(name, path - 40);
  bytes[name + 4] = '\x0b';
  ExpectRefusedAsOversized(bytes);
}

TEST_F(CarsTest, CarsRejectsATruncatedFile) {
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official()));
  const auto size = fs::file_size(MatPath());
  for (const auto keep : {size / 2, size_t{200}, size_t{130}}) {
    ASSERT_TRUE(WriteCarsMat(MatPath(), Official()));
    fs::resize_file(MatPath(), keep);
    ImageSource source;
    const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
    // Every top-level element is checked against the file size first.
    ASSERT_FALSE(s.ok()) << "kept " << keep << " bytes";
    EXPECT_NE(s.message().find("cars_annos.mat"), std::string::npos) << s.ToString();
    EXPECT_EQ(source.size(), 0);
  }
}

TEST_F(CarsTest, CarsReadsCompressedVariablesAndRejectsCorruptOnes) {
  MatLayout layout;
  layout.class_names = false;
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official(), layout));
  const auto annotations_end = fs::file_size(MatPath());
  layout.class_names = true;
  layout.compress_class_names = true;
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official(), layout));
  const auto file_end = fs::file_size(MatPath());
  ASSERT_GT(file_end, annotations_end + 16);
  ImageSource source;
  Status s = ReadCars196(dir_, BenchmarkSplit::kTest, &source);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(source.size(), 2);
  EXPECT_EQ(source.entries[1].label_name, ClassName(196));

  // One damaged byte in the middle of the compressed class_names.
  {
    std::fstream f(MatPath(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>((annotations_end + file_end) / 2));
    f.put('\x5a');
  }
  s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(MatPath()), std::string::npos) << s.ToString();
  EXPECT_TRUE(source.entries.empty());
}

TEST_F(CarsTest, CarsRejectsMissingAnnotationsVariable) {
  MatLayout layout;
  layout.annotations = false;
  const Status s = ReadBad(Official(), layout);
  EXPECT_NE(s.message().find("'annotations'"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsRejectsAnnotationsThatAreNotAStruct) {
  // A cell array named `annotations`.
  mat_t* mat = Mat_CreateVer(MatPath().c_str(), nullptr, MAT_FT_MAT5);
  ASSERT_NE(mat, nullptr);
  size_t dims[2] = {1, 1};
  matvar_t* cell = Mat_VarCreate("annotations", MAT_C_CELL, MAT_T_CELL, 2, dims, nullptr, 0);
  Mat_VarSetCell(cell, 0, Chars("car_ims/000001.jpg"));
  EXPECT_EQ(Mat_VarWrite(mat, cell, MAT_COMPRESSION_NONE), 0);
  Mat_VarFree(cell);
  Mat_Close(mat);
  ImageSource source;
  const Status s = ReadCars196(dir_, BenchmarkSplit::kAll, &source);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("cars_annos.mat"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("struct"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsRejectsAMissingField) {
  for (const char* field : {"relative_im_path", "bbox_y2", "class"}) {
    SCOPED_TRACE(field);
    MatLayout layout;
    layout.omit_field = field;
    const Status s = ReadBad(Official(), layout);
    EXPECT_NE(s.message().find(std::string("'") + field + "'"), std::string::npos) << s.ToString();
  }
  // `test` is not used, so it is not required.
  MatLayout layout;
  layout.omit_field = "test";
  ASSERT_TRUE(WriteCarsMat(MatPath(), Official(), layout));
  ImageSource source;
  EXPECT_TRUE(ReadCars196(dir_, BenchmarkSplit::kAll, &source).ok());
  EXPECT_EQ(source.size(), 4);
}

TEST_F(CarsTest, CarsRejectsClassIdsOutsideTheDataSet) {
  for (const double id : {0.0, 197.0, 2.5}) {
    SCOPED_TRACE(id);
    std::vector<Annotation> annos = Official();
    annos[1].class_id = id;  // a double
    const Status s = ReadBad(annos, MatLayout());
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find("annotation 2"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("'class'"), std::string::npos) << s.ToString();
  }
  std::vector<Annotation> annos = Official();
  annos[3].class_id = 197;  // a uint16
  const Status s = ReadBad(annos, MatLayout());
  EXPECT_NE(s.message().find("annotation 4"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("197"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsRejectsAnEmptyBox) {
  std::vector<Annotation> annos = Official();
  annos[2].x2 = annos[2].x1 - 1;
  Status s = ReadBad(annos, MatLayout());
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("annotation 3"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("x2 < x1"), std::string::npos) << s.ToString();

  annos = Official();
  annos[0].y2 = 0;
  s = ReadBad(annos, MatLayout());
  EXPECT_NE(s.message().find("annotation 1"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsRejectsMistypedFields) {
  MatLayout layout;
  layout.path_as_number = true;
  Status s = ReadBad(Official(), layout);
  EXPECT_NE(s.message().find("annotation 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("'relative_im_path'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("char"), std::string::npos) << s.ToString();

  layout = MatLayout();
  layout.wide_bbox_x1 = true;
  s = ReadBad(Official(), layout);
  EXPECT_NE(s.message().find("annotation 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("'bbox_x1'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("1 x 2"), std::string::npos) << s.ToString();
}

TEST_F(CarsTest, CarsBoxesCropWhenDecoding) {
  std::vector<Annotation> annos = Official();
  annos[1].x1 = 100;  // entirely right of the 16 x 12 image
  annos[1].x2 = 120;
  ASSERT_TRUE(WriteCarsMat(MatPath(), annos));
  ImageSource source;
  ASSERT_TRUE(ReadCars196(dir_, BenchmarkSplit::kAll, &source).ok());

  ImageInputOptions options{{3, 8, 8}, ImageFit::kResize, /*crop_to_box=*/true};
  DecodedImages decoded;
  ASSERT_TRUE(DecodeImages(source, 0, 2, options, &decoded).ok());
  ASSERT_EQ(decoded.entries, (std::vector<int64_t>{0}));
  EXPECT_EQ(decoded.pixels.size(), 3u * 8 * 8);
  ASSERT_EQ(decoded.errors.size(), 1u);
  EXPECT_EQ(decoded.errors[0].entry, 1);
  EXPECT_NE(decoded.errors[0].message.find(source.entries[1].path), std::string::npos)
      << decoded.errors[0].message;
}

}  // namespace
}  // namespace datasets
}  // namespace hedgedb
