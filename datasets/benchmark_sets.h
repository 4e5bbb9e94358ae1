// CUB-200-2011 and Cars-196 in their official layouts, read as labelled image
// sources for the class-disjoint metric-learning protocol (docs/images.md):
//
//   CUB-200-2011  ROOT/images.txt            "<image id> <relative path>"
//                 ROOT/image_class_labels.txt "<image id> <class id>"
//                 ROOT/classes.txt            "<class id> <class name>"
//                 ROOT/bounding_boxes.txt     "<image id> <x> <y> <width> <height>"
//                 ROOT/images/<relative path>
//                 classes 1-100 train (5,864 images), 101-200 test (5,924)
//   Cars-196      ROOT/cars_annos.mat  (MATLAB; read with libmatio):
//                   annotations: struct array with relative_im_path,
//                     bbox_x1, bbox_y1, bbox_x2, bbox_y2 (1-based, inclusive),
//                     class, test
//                   class_names: cell array of the 196 names
//                 ROOT/<relative_im_path>   (car_ims/000001.jpg, ...)
//                 classes 1-98 train (8,054 images), 99-196 test (8,131); the
//                 file's `test` flag (the classification split) is not used
//
// Entries are in image-id order (CUB) or the annotations' order (Cars), with the official 1-based
// class id as the label, the class name as label_name, an absolute path, and the bounding box in
// 0-based pixels (ImageEntry::box; decoding crops to it when asked). Errors name the file and the
// line (or the .mat field): a missing file, an image id without a class or box, a class id outside
// the data set, a malformed line. The image files themselves are checked when decoded.
//
// Torch- and OpenCV-free; the Cars reader needs libmatio (benchmark_sets_cars.cc).
#pragma once

#include <cstdint>
#include <string>

#include "datasets/image_set.h"
#include "hedgedb/status.h"

namespace hedgedb {
namespace datasets {

// Which classes of the class-disjoint protocol to read. The official split
// is by class id (CUB 1-100 / 101-200, Cars 1-98 / 99-196); a `class_split`
// K > 0 moves the boundary (classes 1..K train, the others test), for subsets
// of a data set that keep only some classes.
enum class BenchmarkSplit {
  kTrain,  // CUB 1-100, Cars 1-98
  kTest,   // CUB 101-200, Cars 99-196
  kAll,
};
const char* BenchmarkSplitName(BenchmarkSplit split);
bool ParseBenchmarkSplit(const std::string& name, BenchmarkSplit* split);

// The absolute path of `relative` under `root` (an absolute, normal path);
// an absolute `relative`, or one that climbs out of `root` with "..", is a
// Corruption that starts with `where` (annotations are untrusted input).
Status ResolveUnderRoot(const std::string& root, const std::string& relative,
                        const std::string& where, std::string* path);

Status ReadCub200(const std::string& root, BenchmarkSplit split, ImageSource* source,
                  int64_t class_split = 0);

// The CUB-200-2011 annotation files' contents, as ReadCub200 reads them.
struct CubAnnotations {
  std::string images;              // images.txt
  std::string image_class_labels;  // image_class_labels.txt
  std::string bounding_boxes;      // bounding_boxes.txt
  bool has_classes = false;        // classes.txt is optional (names only)
  std::string classes;             // classes.txt
};
// ReadCub200's parser: no file is opened. `root` (absolute and normal) names
// the files in errors and is the folder the image paths resolve under
// (root/images/...).
Status ParseCub200(const std::string& root, const CubAnnotations& files, BenchmarkSplit split,
                   ImageSource* source, int64_t class_split = 0);
Status ReadCars196(const std::string& root, BenchmarkSplit split, ImageSource* source,
                   int64_t class_split = 0);

// A folder of class folders (torchvision's ImageFolder convention:
// ROOT/<class name>/**/<image>, every image file at any depth below a class
// folder), read for the same class-disjoint protocol: the classes in name
// order, the first half (rounded down; at least 1) train, the rest test, or
// classes 1..K train with class_split K. Labels and label names are those
// `ingest-images --dir ROOT` gives (LabelOfName of the folder name); entries
// are sorted by path; no boxes. Errors: no such directory, images directly in
// ROOT or no class folders, fewer than 2 classes, two folder names with one
// label (e.g. "7" and "07").
Status ReadImageFolderSet(const std::string& root, BenchmarkSplit split, ImageSource* source,
                          int64_t class_split = 0);

// The data sets of the class-disjoint protocol by name: "cub", "cars",
// "folder" (the part of a --data source before ':'). False for another name.
bool IsBenchmarkSet(const std::string& name);
Status ReadBenchmarkSet(const std::string& name, const std::string& root, BenchmarkSplit split,
                        ImageSource* source, int64_t class_split = 0);

// The last training class id: `official` for class_split 0, else
// class_split, which must leave both sides a class (in [1, classes - 1]).
Status TrainClassesOf(int64_t class_split, int64_t official, int64_t classes,
                      int64_t* train_classes);
// The classes of `split`: "classes 101-200" (K = 0: the official split).
std::string SplitClassesText(BenchmarkSplit split, int64_t train_classes, int64_t classes);
// The error of a split without images: names the split's classes and the
// class ids the annotations hold, and the option that moves the boundary (class_split).
Status EmptySplitError(const std::string& where, const char* data_set, BenchmarkSplit split,
                       int64_t train_classes, int64_t classes, int64_t min_label,
                       int64_t max_label);

}  // namespace datasets
}  // namespace hedgedb
