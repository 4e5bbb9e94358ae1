// Writes the seed corpora of fuzz/corpus/<target>/ from the project's own
// writers (the same encoders the tests use), so the seeds are valid files the
// fuzzer mutates from. Usage: make_seeds <corpus dir>. Run by
// scripts/fuzz.sh --seeds; the output is committed.
#include <matio.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "calibration/calibration_map.h"
#include "datasets/idx_reader.h"
#include "encoders/models/model_file.h"
#include "hedgedb/npy.h"
#include "index/index_file.h"
#include "query/arena_file.h"
#include "storage/record_store.h"
#include "tools/payload_text.h"

using namespace hedgedb;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void Put(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_root / target);
  std::ofstream(g_root / target / name, std::ios::binary | std::ios::trunc) << bytes;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void NpySeeds(const fs::path& tmp) {
  const std::vector<std::pair<std::string, NpyArray>> arrays = {
      {"f32_2x3", MakeNpy(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
      {"i64_4", MakeNpy(std::vector<int64_t>{0, 1, 7, -3}, {4})},
      {"i32_2x2", MakeNpy(std::vector<int32_t>{1, 2, 3, 4}, {2, 2})},
  };
  for (const auto& [name, array] : arrays) {
    const fs::path p = tmp / (name + ".npy");
    if (WriteNpy(p.string(), array).ok()) Put("npy", name, Slurp(p));
  }
}

void RecordSeeds() {
  const std::vector<float> row = {0.5f, -1.0f, 2.0f, 3.5f};
  const std::string payload = "payload";
  storage::RecordWrite w;
  w.id = 17;
  w.has_label = true;
  w.label = 3;
  w.row = row.data();
  w.payload = &payload;
  // byte 0: row bytes / 4; byte 1: fix the checksum; the 12-byte key; value.
  const std::string value = storage::RecordStore::EncodeRecord(5, w, row.size() * 4);
  Put("record", "labelled",
      std::string(1, char(row.size())) + std::string(1, '\0') +
          storage::RecordStore::RecordKey(1, w.id) + value);
  w.has_label = false;
  Put("record", "unlabelled",
      std::string(1, char(row.size())) + std::string(1, '\1') +
          storage::RecordStore::RecordKey(2, -4) +
          storage::RecordStore::EncodeRecord(9, w, row.size() * 4));
}

void CatalogSeeds() {
  CollectionSpec spec;
  spec.name = "docs";
  spec.kind = Kind::kGaussian;
  spec.dim = 8;
  Put("catalog_spec", "gaussian", storage::SpecToJson(spec));
  spec.kind = Kind::kCodes;
  spec.dim = 4;
  spec.code_k = 16;
  spec.index_factory = "PQ";
  Put("catalog_spec", "codes", storage::SpecToJson(spec));
}

void IndexSeeds() {
  const std::string blob = "IxFl some faiss bytes";
  // Every field set, so that the round trip of the seed itself reaches each.
  index::IndexUpkeep upkeep;
  upkeep.changes_since_check = 1200;
  upkeep.checked_sequence = 10;
  upkeep.checked_time = 1790000000;
  upkeep.checked_recall = 0.962;
  upkeep.retrained_sequence = 8;
  upkeep.retrained_time = 1780000000;
  upkeep.retrains = 1;
  upkeep.fitted_knob = 4;
  upkeep.fitted_recall = 0.981;
  upkeep.retrain_reason = "recall estimate 0.900 < 0.961";
  upkeep.note = "checked at sequence 10";
  upkeep.coarse_recall = 0.9431;
  upkeep.oversampling = 20;
  const std::string payload = index::EncodeUpkeepPrefix(index::EncodeIndexUpkeep(upkeep)) + blob;
  Put("index_header", "valid",
      std::string(1, '\2') + index::EncodeIndexFileHeader(9500, 12, 77, payload) + payload);
  Put("index_header", "version2",
      std::string(1, '\2') + index::EncodeIndexFileHeader(9500, 12, 77, blob, 2) + blob);
  Put("index_header", "fixed",
      std::string(1, '\3') +
          index::EncodeIndexFileHeader(index::kUnknownRecall, 1, 5, std::string()));
}

// Arena snapshots from the writer: one as it lies on disk (mode 0x14: own
// binding, also through the path reader), and compact forms without the
// zeros before the rows (mode 0x16, see fuzz/arena_fuzzer.cc), which the
// fuzzer mutates much faster than 64 KiB files.
void ArenaSeeds(const fs::path& tmp) {
  const fs::path p = tmp / "seed.harena";
  query::ArenaTables tables;
  tables.ids = {5, -2, 9};
  tables.sequences = {1, 3, 3};
  tables.labels = {0, 7, 0};
  tables.flags = {0, query::kArenaHasLabel, 0};
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, -1, 0.5f, 2.5f, 0, 1e-3f, 7};
  const std::string_view run(reinterpret_cast<const char*>(rows.data()), rows.size() * 4);
  const auto compact = [](const std::string& file, size_t n) {
    const size_t tables_end = query::kArenaHeaderBytes + n * 25;
    const size_t rows_offset = (tables_end + query::kArenaRowsAlignment - 1) /
                               query::kArenaRowsAlignment * query::kArenaRowsAlignment;
    return file.substr(0, tables_end) + file.substr(rows_offset);
  };
  if (query::WriteArenaSnapshot(p.string(), 4, 77, 16, RowFormat::kFloat32, tables, {run}).ok()) {
    Put("arena", "rows3", std::string(1, '\x14') + Slurp(p));
    Put("arena", "rows3_compact", std::string(1, '\x16') + compact(Slurp(p), 3));
  }
  if (query::WriteArenaSnapshot(p.string(), 1, 5, 8, RowFormat::kFloat32, query::ArenaTables(), {})
          .ok()) {
    Put("arena", "empty_compact", std::string(1, '\x16') + compact(Slurp(p), 0));
  }
}

// The Python binding's array arguments as NumPy hands them over: dtype kind,
// item size, target (bit 0: int32; bit 1: also as float64), then the
// elements (fuzz/py_args_fuzzer.cc).
void PyArgsSeeds() {
  const auto seed = [](const std::string& name, char kind, int size, int target, const void* data,
                       size_t bytes) {
    std::string input = {kind, char(size), char(target)};
    input.append(static_cast<const char*>(data), bytes);
    Put("py_args", name, input);
  };
  const int64_t i8[] = {0, -1, 7, INT64_MAX, INT64_MIN, int64_t(1) << 32};
  seed("int64", 'i', 8, 0, i8, sizeof(i8));
  seed("int64_to_int32", 'i', 8, 1, i8, sizeof(i8));
  const uint64_t u8[] = {3, uint64_t(1) << 63};
  seed("uint64", 'u', 8, 0, u8, sizeof(u8));
  const int16_t i2[] = {-300, 300};
  seed("int16", 'i', 2, 1, i2, sizeof(i2));
  const uint8_t u1[] = {0, 255};
  seed("uint8", 'u', 1, 0, u1, sizeof(u1));
  const double f8[] = {2.0, 0.5, -3.0, 1e300, 1e-320, 9223372036854775808.0};
  seed("float64", 'f', 8, 2, f8, sizeof(f8));
  const float f4[] = {1.0f, 1.7f, -2147483648.0f};
  seed("float32_to_int32", 'f', 4, 1, f4, sizeof(f4));
  const uint8_t b1[] = {1, 0};
  seed("bool", 'b', 1, 0, b1, sizeof(b1));
  seed("float16", 'f', 2, 0, b1, sizeof(b1));
}

calibration::CalibrationMap PlattMap() {
  calibration::CalibrationMap map;
  map.method = calibration::Method::kPlatt;
  map.score_type = ScoreType::kMc;
  map.params = {2.0, -1.0};
  map.num_pairs = 100;
  map.samples = 16;
  return map;
}

void CalibrationSeeds() {
  calibration::CalibrationMap map = PlattMap();
  Put("calibration_map", "platt", std::string(1, '\0') + map.Encode());
  map.method = calibration::Method::kIsotonic;
  map.params.clear();
  map.knot_score = {-2.0, 0.0, 1.0};
  map.knot_prob = {0.1, 0.5, 0.9};
  Put("calibration_map", "isotonic", std::string(1, '\0') + map.Encode());
  // Conditional: the score and the rank-1 bucket (format version 2).
  map.method = calibration::Method::kConditional;
  map.knot_score.clear();
  map.knot_prob.clear();
  map.features = (1u << calibration::kFeatureScore) | (1u << calibration::kFeatureRankBucket);
  map.input_lo = {-5.0, 0.0, 0.0, -3.0, -3.0};
  map.input_hi = {5.0, 4.0, 6.0, 0.0, 0.0};
  map.input_mean = {0.0, 1.0, 3.0, -1.0, -1.0};
  map.feature_mean = {0.0, 0.01};
  map.feature_scale = {2.0, 0.1};
  map.params = {1.5, 0.5, -3.0};
  Put("calibration_map", "conditional", std::string(1, '\0') + map.Encode());
}

void ModelSeeds() {
  encoders::ModelSpec spec;
  Put("model_file", "format2",
      std::string(1, '\0') + encoders::EncodeModelFile(spec, "weights", nullptr));
  encoders::ModelCalibration calibration;
  calibration.map = PlattMap().Encode();
  calibration.info.score = ScoreType::kMc;
  calibration.info.method = "platt";
  calibration.info.pairs = 100;
  spec.kind = Kind::kPoint;
  spec.method = encoders::Method::kSoftContrastive;
  spec.backbone = encoders::BackboneType::kMlp;
  spec.input_shape = {16};
  Put("model_file", "format3",
      std::string(1, '\0') + encoders::EncodeModelFile(spec, "weights", &calibration));
}

void IdxSeeds(const fs::path& tmp) {
  datasets::IdxImages images;
  images.count = 2;
  images.rows = 3;
  images.cols = 2;
  images.pixels = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};
  const fs::path p = tmp / "images.idx";
  if (datasets::WriteIdxImages(p.string(), images, false).ok()) {
    Put("idx", "images", std::string(1, '\0') + Slurp(p));
    Put("idx", "images_gz", std::string(1, '\2') + Slurp(p));
  }
  if (datasets::WriteIdxLabels(p.string(), {1, 0, 9}, false).ok()) {
    Put("idx", "labels", std::string(1, '\1') + Slurp(p));
  }
  if (datasets::WriteIdxLabels(p.string(), {3, 4}, true).ok()) {
    Put("idx", "labels_gzip_file", std::string(1, '\1') + Slurp(p));
  }
}

void CubSeeds() {
  const std::string sep(1, '\xff');
  Put("cub", "small",
      "1 001.A/a_1.jpg\n2 001.A/a_2.jpg\n3 101.B/b_1.jpg\n" + sep + "1 1\n2 1\n3 101\n" + sep +
          "1 60.0 27.0 325.0 304.0\n2 1 2 3 4\n3 0.5 0.5 10 10\n" + sep + "1 001.A\n101 101.B\n" +
          sep + "\x02");
}

// The two forms ImageEntry::Payload writes (files, IDX images).
void PayloadSeeds() {
  Put("payload", "file", R"({"label_name":"3","path":"/data/a/3/x.png"})");
  Put("payload", "idx", R"({"index":17,"path":"/data/t10k-images.idx3-ubyte"})");
}

// Payload files as `ingest --payloads` reads them: plain lines (first byte
// even) and base64 lines of arbitrary bytes (odd).
void PayloadLinesSeeds() {
  Put("payload_lines", "plain", std::string(1, '\0') + "{\"a\":1}\r\nsecond line\n\nlast");
  std::string lines(1, '\1');
  for (const std::string& bytes : {std::string("text"), std::string("\xff\xfe\n\0", 4),
                                   std::string("caf\xc3\xa9"), std::string()}) {
    lines += cli::Base64Encode(bytes) + "\n";
  }
  Put("payload_lines", "base64", lines);
}

matvar_t* Number(double v) {
  size_t dims[2] = {1, 1};
  return Mat_VarCreate(nullptr, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, dims, &v, 0);
}

matvar_t* Chars(const std::string& text) {
  size_t dims[2] = {1, text.size()};
  return Mat_VarCreate(nullptr, MAT_C_CHAR, MAT_T_UINT8, 2, dims, const_cast<char*>(text.data()),
                       0);
}

void CarsSeed(const fs::path& tmp, bool compress) {
  const fs::path p = tmp / "cars_annos.mat";
  fs::remove(p);
  mat_t* mat = Mat_CreateVer(p.string().c_str(), nullptr, MAT_FT_MAT5);
  if (mat == nullptr) return;
  const char* fields[] = {"relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2",
                          "bbox_y2",          "class",   "test"};
  size_t dims[2] = {1, 2};
  matvar_t* s = Mat_VarCreateStruct("annotations", 2, dims, fields, 7);
  for (size_t i = 0; i < 2; ++i) {
    Mat_VarSetStructFieldByName(s, "relative_im_path", i,
                                Chars("car_ims/00000" + std::to_string(i + 1) + ".jpg"));
    Mat_VarSetStructFieldByName(s, "bbox_x1", i, Number(1));
    Mat_VarSetStructFieldByName(s, "bbox_y1", i, Number(2));
    Mat_VarSetStructFieldByName(s, "bbox_x2", i, Number(30));
    Mat_VarSetStructFieldByName(s, "bbox_y2", i, Number(20));
    Mat_VarSetStructFieldByName(s, "class", i, Number(i == 0 ? 1 : 150));
    Mat_VarSetStructFieldByName(s, "test", i, Number(double(i)));
  }
  Mat_VarWrite(mat, s, compress ? MAT_COMPRESSION_ZLIB : MAT_COMPRESSION_NONE);
  Mat_VarFree(s);
  size_t cdims[2] = {1, 196};
  matvar_t* cell = Mat_VarCreate("class_names", MAT_C_CELL, MAT_T_CELL, 2, cdims, nullptr, 0);
  for (int c = 0; c < 196; ++c) Mat_VarSetCell(cell, c, Chars("M" + std::to_string(c + 1)));
  Mat_VarWrite(mat, cell, compress ? MAT_COMPRESSION_ZLIB : MAT_COMPRESSION_NONE);
  Mat_VarFree(cell);
  Mat_Close(mat);
  Put("cars", compress ? "zlib" : "plain", Slurp(p));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <corpus dir>\n");
    return 2;
  }
  g_root = argv[1];
  const fs::path tmp = fs::temp_directory_path() / "hedgedb-make-seeds";
  fs::create_directories(tmp);
  NpySeeds(tmp);
  RecordSeeds();
  CatalogSeeds();
  IndexSeeds();
  CalibrationSeeds();
  ArenaSeeds(tmp);
  PyArgsSeeds();
  ModelSeeds();
  IdxSeeds(tmp);
  CubSeeds();
  PayloadSeeds();
  PayloadLinesSeeds();
  CarsSeed(tmp, false);
  CarsSeed(tmp, true);
  fs::remove_all(tmp);
  return 0;
}
