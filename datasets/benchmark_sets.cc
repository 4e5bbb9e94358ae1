// CUB-200-2011 (plain-text annotation files) and the split helpers; the
// Cars-196 reader (libmatio) is in benchmark_sets_cars.cc.

#include "datasets/benchmark_sets.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "datasets/image_set.h"

namespace hedgedb {
namespace datasets {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCubClasses = 200;
constexpr int64_t kCubTrainClasses = 100;

// The whole text of an annotation file. Errors name the file.
Status ReadAnnotationFile(const fs::path& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fs::exists(path)
               ? Status::IOError(path.string() + ": cannot open the file")
               : Status::NotFound(path.string() + ": no such file (is " +
                                  path.parent_path().string() + " a CUB-200-2011 root?)");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IOError(path.string() + ": read error");
  *text = buffer.str();
  return Status::OK();
}

// The whitespace-separated fields of every non-blank line of `text`, with the
// 1-based line number.
void SplitFields(const std::string& text,
                 std::vector<std::pair<int64_t, std::vector<std::string>>>* lines) {
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream fields(line);
    std::vector<std::string> parts;
    for (std::string f; fields >> f;) parts.push_back(f);
    if (!parts.empty()) lines->emplace_back(number, std::move(parts));
  }
}

std::string Where(const fs::path& path, int64_t line) {
  return path.string() + " line " + std::to_string(line);
}

bool ParseId(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 1) return false;
  *value = v;
  return true;
}

bool ParseNumber(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *value = v;
  return true;
}

// "<id> <rest of the line>" pairs (the rest may hold spaces), ids unique.
// `path` names the file in errors.
Status ParseIdTable(const fs::path& path, const std::string& text,
                    std::map<int64_t, std::string>* table) {
  std::vector<std::pair<int64_t, std::vector<std::string>>> lines;
  SplitFields(text, &lines);
  for (const auto& [number, parts] : lines) {
    int64_t id = 0;
    if (parts.size() < 2 || !ParseId(parts[0], &id)) {
      return Status::Corruption(Where(path, number) + ": expected '<id> <value>'");
    }
    std::string rest = parts[1];
    for (size_t i = 2; i < parts.size(); ++i) rest += " " + parts[i];
    if (!table->emplace(id, rest).second) {
      return Status::Corruption(Where(path, number) + ": id " + std::to_string(id) +
                                " appears twice");
    }
  }
  if (table->empty()) return Status::Corruption(path.string() + ": the file is empty");
  return Status::OK();
}

bool InSplit(int64_t label, int64_t train_classes, BenchmarkSplit split) {
  switch (split) {
    case BenchmarkSplit::kTrain:
      return label <= train_classes;
    case BenchmarkSplit::kTest:
      return label > train_classes;
    case BenchmarkSplit::kAll:
      break;
  }
  return true;
}

}  // namespace

Status TrainClassesOf(int64_t class_split, int64_t official, int64_t classes,
                      int64_t* train_classes) {
  if (class_split < 0 || class_split >= classes) {
    return Status::InvalidArgument("class_split must be in [1, " + std::to_string(classes - 1) +
                                   "] (0: the official " + std::to_string(official) + "), got " +
                                   std::to_string(class_split));
  }
  *train_classes = class_split > 0 ? class_split : official;
  return Status::OK();
}

std::string SplitClassesText(BenchmarkSplit split, int64_t train_classes, int64_t classes) {
  switch (split) {
    case BenchmarkSplit::kTrain:
      return "classes 1-" + std::to_string(train_classes);
    case BenchmarkSplit::kTest:
      return "classes " + std::to_string(train_classes + 1) + "-" + std::to_string(classes);
    case BenchmarkSplit::kAll:
      break;
  }
  return "classes 1-" + std::to_string(classes);
}

Status EmptySplitError(const std::string& where, const char* data_set, BenchmarkSplit split,
                       int64_t train_classes, int64_t classes, int64_t min_label,
                       int64_t max_label) {
  std::string message = where + ": no " + data_set + " images in the " + BenchmarkSplitName(split) +
                        " split (" + SplitClassesText(split, train_classes, classes) + ")";
  if (min_label > 0) {
    message += "; the annotations hold classes " + std::to_string(min_label) + "-" +
               std::to_string(max_label) +
               ": for a subset, class_split K trains on classes 1..K and tests on the rest";
  }
  return Status::InvalidArgument(message);
}

Status ResolveUnderRoot(const std::string& root, const std::string& relative,
                        const std::string& where, std::string* path) {
  const fs::path rel = fs::path(relative).lexically_normal();
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory() ||
      (!rel.empty() && *rel.begin() == "..")) {
    return Status::Corruption(where + ": the image path '" + relative +
                              "' is not inside the data set root");
  }
  *path = (fs::path(root) / rel).lexically_normal().string();
  return Status::OK();
}

const char* BenchmarkSplitName(BenchmarkSplit split) {
  switch (split) {
    case BenchmarkSplit::kTrain:
      return "train";
    case BenchmarkSplit::kTest:
      return "test";
    case BenchmarkSplit::kAll:
      break;
  }
  return "all";
}

bool ParseBenchmarkSplit(const std::string& name, BenchmarkSplit* split) {
  for (BenchmarkSplit s : {BenchmarkSplit::kTrain, BenchmarkSplit::kTest, BenchmarkSplit::kAll}) {
    if (name == BenchmarkSplitName(s)) {
      *split = s;
      return true;
    }
  }
  return false;
}

Status ReadImageFolderSet(const std::string& root, BenchmarkSplit split, ImageSource* source,
                          int64_t class_split) {
  *source = ImageSource();
  ImageSource all;
  HEDGEDB_RETURN_IF_ERROR(ListImageDirectory(root, &all));
  if (all.size() > 0 && !all.entries.front().has_label) {
    return Status::InvalidArgument(root +
                                   ": a training folder needs one subfolder per class "
                                   "(ROOT/<class>/<image>); it holds images directly");
  }
  // Entries are sorted by path, so a class's images are contiguous and the
  // classes come in name order.
  std::vector<std::string> names;
  std::map<int64_t, std::string> name_of_label;
  for (const ImageEntry& e : all.entries) {
    if (!names.empty() && names.back() == e.label_name) continue;
    names.push_back(e.label_name);
    const auto [it, added] = name_of_label.emplace(e.label, e.label_name);
    if (!added) {
      return Status::InvalidArgument(root + ": the class folders '" + it->second + "' and '" +
                                     e.label_name + "' have the same label " +
                                     std::to_string(e.label) + "; rename one");
    }
  }
  const int64_t classes = static_cast<int64_t>(names.size());
  if (classes < 2) {
    return Status::InvalidArgument(root + ": " + std::to_string(classes) +
                                   " class folder; training and testing on disjoint classes "
                                   "needs at least 2");
  }
  int64_t train_classes = 0;
  HEDGEDB_RETURN_IF_ERROR(TrainClassesOf(class_split, classes / 2, classes, &train_classes));
  int64_t index = -1;
  std::string current;
  for (ImageEntry& e : all.entries) {
    if (index < 0 || e.label_name != current) {
      ++index;
      current = e.label_name;
    }
    const bool train = index < train_classes;
    if (split == BenchmarkSplit::kAll || train == (split == BenchmarkSplit::kTrain)) {
      source->entries.push_back(std::move(e));
    }
  }
  return Status::OK();
}

bool IsBenchmarkSet(const std::string& name) {
  return name == "cub" || name == "cars" || name == "folder";
}

Status ReadBenchmarkSet(const std::string& name, const std::string& root, BenchmarkSplit split,
                        ImageSource* source, int64_t class_split) {
  if (name == "cub") return ReadCub200(root, split, source, class_split);
  if (name == "cars") return ReadCars196(root, split, source, class_split);
  if (name == "folder") return ReadImageFolderSet(root, split, source, class_split);
  return Status::InvalidArgument("unknown data set '" + name + "' (cub, cars or folder)");
}

Status ReadCub200(const std::string& root_dir, BenchmarkSplit split, ImageSource* source,
                  int64_t class_split) {
  std::error_code ec;
  const fs::path root = fs::absolute(root_dir, ec).lexically_normal();
  if (ec || !fs::is_directory(root, ec)) {
    return Status::NotFound(root_dir + ": no such directory (the CUB-200-2011 root)");
  }
  CubAnnotations files;
  HEDGEDB_RETURN_IF_ERROR(ReadAnnotationFile(root / "images.txt", &files.images));
  HEDGEDB_RETURN_IF_ERROR(
      ReadAnnotationFile(root / "image_class_labels.txt", &files.image_class_labels));
  // classes.txt only names the classes; without it the name is the id.
  files.has_classes = fs::exists(root / "classes.txt");
  if (files.has_classes) {
    HEDGEDB_RETURN_IF_ERROR(ReadAnnotationFile(root / "classes.txt", &files.classes));
  }
  HEDGEDB_RETURN_IF_ERROR(ReadAnnotationFile(root / "bounding_boxes.txt", &files.bounding_boxes));
  return ParseCub200(root.string(), files, split, source, class_split);
}

Status ParseCub200(const std::string& root_dir, const CubAnnotations& files, BenchmarkSplit split,
                   ImageSource* source, int64_t class_split) {
  int64_t train_classes = 0;
  HEDGEDB_RETURN_IF_ERROR(
      TrainClassesOf(class_split, kCubTrainClasses, kCubClasses, &train_classes));
  int64_t min_label = 0, max_label = 0;
  const fs::path root = fs::path(root_dir);
  std::map<int64_t, std::string> images, image_classes, class_names;
  HEDGEDB_RETURN_IF_ERROR(ParseIdTable(root / "images.txt", files.images, &images));
  HEDGEDB_RETURN_IF_ERROR(
      ParseIdTable(root / "image_class_labels.txt", files.image_class_labels, &image_classes));
  if (files.has_classes) {
    HEDGEDB_RETURN_IF_ERROR(ParseIdTable(root / "classes.txt", files.classes, &class_names));
  }
  const fs::path boxes_path = root / "bounding_boxes.txt";
  std::vector<std::pair<int64_t, std::vector<std::string>>> box_lines;
  SplitFields(files.bounding_boxes, &box_lines);
  std::map<int64_t, ImageEntry::Box> boxes;
  for (const auto& [number, parts] : box_lines) {
    int64_t id = 0;
    ImageEntry::Box b;
    if (parts.size() != 5 || !ParseId(parts[0], &id) || !ParseNumber(parts[1], &b.x) ||
        !ParseNumber(parts[2], &b.y) || !ParseNumber(parts[3], &b.width) ||
        !ParseNumber(parts[4], &b.height)) {
      return Status::Corruption(Where(boxes_path, number) +
                                ": expected '<image id> <x> <y> <width> <height>'");
    }
    if (b.width <= 0 || b.height <= 0) {
      return Status::Corruption(Where(boxes_path, number) + ": the box of image " +
                                std::to_string(id) + " is empty");
    }
    if (!boxes.emplace(id, b).second) {
      return Status::Corruption(Where(boxes_path, number) + ": image " + std::to_string(id) +
                                " has a second bounding box");
    }
  }

  const fs::path labels_path = root / "image_class_labels.txt";
  ImageSource out;
  for (const auto& [id, relative] : images) {
    const auto label_it = image_classes.find(id);
    if (label_it == image_classes.end()) {
      return Status::Corruption(labels_path.string() + ": no class for image " +
                                std::to_string(id) + " (" + relative + ")");
    }
    int64_t label = 0;
    if (!ParseId(label_it->second, &label) || label > kCubClasses) {
      return Status::Corruption(labels_path.string() + ": image " + std::to_string(id) +
                                " has class '" + label_it->second + "', not 1.." +
                                std::to_string(kCubClasses));
    }
    const auto box_it = boxes.find(id);
    if (box_it == boxes.end()) {
      return Status::Corruption(boxes_path.string() + ": no bounding box for image " +
                                std::to_string(id) + " (" + relative + ")");
    }
    min_label = min_label == 0 ? label : std::min(min_label, label);
    max_label = std::max(max_label, label);
    if (!InSplit(label, train_classes, split)) continue;
    ImageEntry e;
    HEDGEDB_RETURN_IF_ERROR(ResolveUnderRoot(
        (root / "images").string(), relative,
        (root / "images.txt").string() + ": image " + std::to_string(id), &e.path));
    e.has_label = true;
    e.label = label;
    const auto name_it = class_names.find(label);
    e.label_name = name_it != class_names.end() ? name_it->second : std::to_string(label);
    e.has_box = true;
    e.box = box_it->second;
    out.entries.push_back(std::move(e));
  }
  if (out.entries.empty()) {
    return EmptySplitError(root_dir, "CUB-200-2011", split, train_classes, kCubClasses, min_label,
                           max_label);
  }
  *source = std::move(out);
  return Status::OK();
}

}  // namespace datasets
}  // namespace hedgedb
