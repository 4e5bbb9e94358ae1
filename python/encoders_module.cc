// hedgedb._encoders (hedgedb.encoders.Model): a trained model file embeds
// images (files, or NumPy arrays) into the arrays `DB.ingest` and
// `DB.search` take, through the same code as `hedgedb ingest-images`
// (datasets/image_set.h decoding and fitting, EncoderModel::Embed). Built only
// with the encoders (LibTorch); docs/python.md, "Encoders".

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "datasets/image_set.h"
#include "encoders/embedder.h"
#include "encoders/engine_bridge.h"
#include "encoders/eval/evaluation.h"
#include "encoders/eval/metrics.h"
#include "encoders/models/model_fields.h"
#include "encoders/models/model_file.h"
#include "hedgedb/fields.h"
#include "hedgedb/score.h"

namespace py = pybind11;

namespace hedgedb {
namespace python {
namespace {

[[noreturn]] void Raise(const Status& s) {
  py::object hedgedb = py::module_::import("hedgedb");
  const char* type = s.IsNotFound() ? "NotFoundError" : "InvalidArgumentError";
  PyErr_SetString(hedgedb.attr(type).ptr(), s.message().c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
py::array_t<T> Array(const std::vector<T>& values, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  std::copy(values.begin(), values.end(), a.mutable_data());
  return a;
}

// Writes the fields model_fields.h and hedgedb/fields.h visit into a dict:
// enums by their stored names, groups as nested dicts.
struct DictFieldWriter {
  py::dict* d;
  void operator()(const char* name, encoders::Method v) const {
    (*d)[name] = encoders::MethodName(v);
  }
  void operator()(const char* name, Kind v) const { (*d)[name] = KindName(v); }
  void operator()(const char* name, encoders::BackboneType v) const {
    (*d)[name] = encoders::BackboneTypeName(v);
  }
  void operator()(const char* name, ScoreType v) const { (*d)[name] = ScoreName(v); }
  void operator()(const char* name, const encoders::BackboneFields& v) const { Group(name, v); }
  void operator()(const char* name, const encoders::DataSettings& v) const { Group(name, v); }
  // Numbers, bools, text and lists of numbers as Python objects.
  template <typename T>
  void operator()(const char* name, const T& v) const {
    (*d)[name] = v;
  }
  template <typename T>
  void Group(const char* name, const T& v) const {
    py::dict group;
    VisitFields(v, DictFieldWriter{&group});
    (*d)[name] = group;
  }
};

class PyModel {
 public:
  PyModel(const std::string& path, int threads) : path_(path) {
    encoders::SetEncoderThreads(threads);
    Status s;
    {
      py::gil_scoped_release release;
      s = encoders::EncoderModel::Load(path, &model_);
    }
    if (!s.ok())
      Raise(Status::InvalidArgument("cannot load model '" + path + "': " + s.ToString()));
    spec_ = model_->spec();
  }

  // Every field of the model file's header (model_fields.h), and the score
  // its embeddings are searched with.
  py::dict Spec() const {
    py::dict d;
    VisitFields(spec_, DictFieldWriter{&d});
    d["search_score"] = ScoreName(encoders::ModelScore(spec_));
    return d;
  }

  // db.create_collection(name, **model.create_kwargs) makes the collection
  // ingest-images would make for this model.
  py::dict CreateKwargs() const {
    const CollectionSpec c = encoders::CollectionSpecForModel(spec_, "");
    py::dict d;
    d["kind"] = KindName(c.kind);
    d["dim"] = c.dim;
    if (c.kind == Kind::kMog) d["components"] = c.components;
    if (c.kind == Kind::kCodes) d["code_k"] = c.code_k;
    if (c.kind != Kind::kCodes) {
      d["match_a"] = c.match_a;
      d["match_b"] = c.match_b;
    }
    d["samples"] = c.samples;
    // The collection records the model, so that another model's embeddings
    // are refused (embed_images(db=, collection=), ingest-images).
    std::string metadata;
    Check(encoders::RecordModelInMetadata("", path_, &metadata));
    d["metadata"] = metadata;
    return d;
  }

  // Refuses (InvalidArgumentError) embeddings for `collection` of `db` (a
  // hedgedb.DB) when it stores another kind or size than the model makes
  // (encoders::CheckCollectionFitsModel) or holds another model's
  // (encoders::CheckCollectionModel): the rules of ingest-images and
  // query-image. No db: nothing to check.
  void CheckCollection(const py::object& db, const py::object& collection, bool queries) const {
    if (db.is_none() && collection.is_none()) return;
    if (db.is_none() || collection.is_none()) {
      Raise(
          Status::InvalidArgument("give db and collection together (the collection the "
                                  "embeddings are for), or neither"));
    }
    CollectionSpec spec;
    spec.name = collection.cast<std::string>();
    // DB.stats raises NotFoundError for a collection that does not exist.
    const py::dict stats = db.attr("stats")(spec.name);
    spec.metadata = stats["metadata"].cast<std::string>();
    if (!ParseKind(stats["kind"].cast<std::string>(), &spec.kind)) {
      Raise(Status::InvalidArgument("collection '" + spec.name + "' has an unknown kind"));
    }
    spec.dim = stats["dim"].cast<int>();
    spec.components = stats["components"].cast<int>();
    spec.code_k = stats["code_k"].cast<int>();
    spec.match_a = stats["match_a"].cast<float>();
    spec.match_b = stats["match_b"].cast<float>();
    Check(encoders::CheckCollectionFitsModel(spec, spec_, path_));
    Check(encoders::CheckCollectionModel(
        spec, path_, queries ? encoders::ModelUse::kQuery : encoders::ModelUse::kIngest));
  }

  // The calibration map the model file carries (train fits one on its
  // validation split), as DB.import_calibration takes it; None without one.
  py::object CalibrationMap() const {
    const encoders::ModelCalibration& c = model_->calibration();
    if (c.empty()) return py::none();
    return py::bytes(c.map);
  }

  // What the map was fitted on, as db.stats()["calibrations"] reports it
  // (the fields hedgedb/fields.h visits).
  py::object Calibration() const {
    const encoders::ModelCalibration& c = model_->calibration();
    if (c.empty()) return py::none();
    py::dict d;
    VisitFields(c.info, DictFieldWriter{&d});
    return d;
  }

  py::dict EmbedImages(const std::vector<std::string>& paths, const std::string& fit_name,
                       int64_t batch_size, bool queries, const py::object& db,
                       const py::object& collection) {
    CheckCollection(db, collection, queries);
    if (spec_.input_shape.size() != 3) {
      Raise(Status::InvalidArgument("the model '" + path_ + "' takes feature vectors, not images"));
    }
    datasets::ImageInputOptions input;
    input.input_shape = spec_.input_shape;
    // The fit the training data used (resize for CUB/Cars), else exact.
    const std::string fit =
        !fit_name.empty()
            ? fit_name
            : (spec_.data.recorded && !spec_.data.image_fit.empty() ? spec_.data.image_fit
                                                                    : "exact");
    if (!datasets::ParseImageFit(fit, &input.fit)) {
      Raise(Status::InvalidArgument("unknown fit '" + fit + "' (expected exact, resize or crop)"));
    }
    const datasets::ImageSource source = datasets::ImageFilesSource(paths);
    auto decoded = std::make_shared<datasets::DecodedImages>();
    encoders::Embeddings e;
    Status s;
    {
      py::gil_scoped_release release;
      s = datasets::DecodeImages(source, 0, source.size(), input, decoded.get());
      if (s.ok() && !decoded->errors.empty()) {
        s = Status::InvalidArgument(decoded->errors.front().message + " (" +
                                    std::to_string(decoded->errors.size()) + " of " +
                                    std::to_string(source.size()) + " images cannot be used)");
      }
      if (s.ok()) {
        const encoders::ItemSet set = datasets::DecodedImageItemSet(decoded, source);
        s = Embed(set, batch_size, &e);
      }
    }
    Check(s);
    return Arrays(e, queries);
  }

  py::dict EmbedArrays(const py::array& inputs, int64_t batch_size, bool queries,
                       const py::object& db, const py::object& collection) {
    CheckCollection(db, collection, queries);
    // uint8 pixels are scaled to [0, 1], as decoding does; floats are used
    // as they are (pixels in [0, 1], or feature vectors).
    py::array_t<float, py::array::c_style | py::array::forcecast> floats;
    if (py::isinstance<py::array_t<uint8_t>>(inputs)) {
      auto bytes = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(inputs);
      floats = py::array_t<float, py::array::c_style>(
          std::vector<py::ssize_t>(bytes.shape(), bytes.shape() + bytes.ndim()));
      // The scaling of training pixels and decoded files: the same floats.
      datasets::PixelsToFloat(bytes.data(), bytes.size(), floats.mutable_data());
    } else {
      floats = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(inputs);
      if (!floats) {
        PyErr_Clear();
        Raise(Status::InvalidArgument("inputs: expected a numeric array"));
      }
    }
    std::vector<py::ssize_t> want = {-1};
    std::string text = "(n";
    for (int64_t s : spec_.input_shape) {
      want.push_back(s);
      text += ", " + std::to_string(s);
    }
    text += ")";
    bool ok = floats.ndim() == static_cast<py::ssize_t>(want.size());
    for (size_t i = 1; ok && i < want.size(); ++i) ok = floats.shape(i) == want[i];
    if (!ok) {
      std::string got = "(";
      for (py::ssize_t i = 0; i < floats.ndim(); ++i) {
        got += (i ? ", " : "") + std::to_string(floats.shape(i));
      }
      Raise(Status::InvalidArgument("inputs: the model takes " + text + ", got " + got + ")"));
    }
    const int64_t n = floats.shape(0);
    const float* data = floats.data();
    const int64_t per_item = floats.size() / std::max<int64_t>(1, n);
    encoders::ItemSet set;
    set.labels.assign(static_cast<size_t>(n), 0);
    set.input_shape = spec_.input_shape;
    set.render = [data, per_item](const std::vector<int64_t>& items, bool, float* out) {
      for (size_t i = 0; i < items.size(); ++i) {
        std::copy(data + items[i] * per_item, data + (items[i] + 1) * per_item, out + i * per_item);
      }
    };
    encoders::Embeddings e;
    Status s;
    {
      py::gil_scoped_release release;
      s = Embed(set, batch_size, &e);
    }
    Check(s);
    return Arrays(e, queries);
  }

 private:
  Status Embed(const encoders::ItemSet& set, int64_t batch_size, encoders::Embeddings* e) const {
    std::vector<int64_t> items(static_cast<size_t>(set.size()));
    for (int64_t i = 0; i < set.size(); ++i) items[size_t(i)] = i;
    return model_->Embed(set, items, /*corrupt=*/false, e, batch_size);
  }

  // The keyword arrays of DB.ingest (queries=False) or DB.search (True).
  static py::dict Arrays(const encoders::Embeddings& e, bool queries) {
    py::dict d;
    const py::ssize_t n = e.n, D = e.dim, C = e.components;
    switch (e.kind) {
      case Kind::kPoint:
        d["vec"] = Array(e.vec, {n, D});
        break;
      case Kind::kGaussian:
        d["mean"] = Array(e.mean, {n, D});
        d["var"] = Array(e.var, {n, D});
        break;
      case Kind::kMog:
        d["mean"] = Array(e.mean, {n, C, D});
        d["var"] = Array(e.var, {n, C, D});
        d["weights"] = Array(e.weights, {n, C});
        break;
      case Kind::kCodes:
        if (queries) {
          d["logp"] = Array(e.logp, {n, D, static_cast<py::ssize_t>(e.code_k)});
        } else {
          d["codes"] = Array(e.codes, {n, D});
        }
        break;
    }
    return d;
  }

  std::string path_;
  std::unique_ptr<encoders::EncoderModel> model_;
  encoders::ModelSpec spec_;
};

// ---- hedgedb.metrics (python/hedgedb/metrics.py checks the arguments'
// kinds and shapes and names them; these functions take what it passes).

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using LabelArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

std::vector<int64_t> Labels(const LabelArray& labels) {
  return std::vector<int64_t>(labels.data(), labels.data() + labels.size());
}

encoders::RetrievalOptions RetrievalOptionsOf(const std::vector<int>& ks, int knn_k,
                                              bool exclude_self) {
  encoders::RetrievalOptions options;
  options.recall_ks = ks;
  options.knn_k = knn_k;
  options.exclude_same_index = exclude_self;
  return options;
}

// EvaluateRetrieval on a (queries x gallery) similarity matrix; the report
// as JSON text (encoders::RetrievalJson).
std::string RetrievalFromSimilarity(const FloatArray& similarity, const LabelArray& query_labels,
                                    const LabelArray& gallery_labels, bool exclude_self,
                                    const std::vector<int>& ks, int knn_k) {
  if (similarity.ndim() != 2 || similarity.shape(0) != query_labels.size() ||
      similarity.shape(1) != gallery_labels.size()) {
    Raise(Status::InvalidArgument("similarity must have shape (queries, gallery) = (" +
                                  std::to_string(query_labels.size()) + ", " +
                                  std::to_string(gallery_labels.size()) + ")"));
  }
  const std::vector<int64_t> q = Labels(query_labels), g = Labels(gallery_labels);
  const int64_t cols = similarity.shape(1);
  const float* data = similarity.data();
  encoders::RetrievalMetrics metrics;
  Status s;
  {
    py::gil_scoped_release release;
    const encoders::SimilarityRowFn rows = [&](int64_t row, float* out) {
      std::copy_n(data + row * cols, cols, out);
    };
    s = encoders::EvaluateRetrieval(rows, static_cast<int64_t>(q.size()), q, g,
                                    RetrievalOptionsOf(ks, knn_k, exclude_self), &metrics);
  }
  Check(s);
  return encoders::RetrievalJson(metrics).dump();
}

// The arrays of one batch (None where the kind has none), kept alive while
// the engine reads them; variances converted from `var_form` once.
struct Batch {
  std::vector<FloatArray> keep;
  py::array_t<int32_t, py::array::c_style | py::array::forcecast> codes;
  EmbeddingView view;
};

Batch BatchOf(const py::dict& arrays, const std::string& var_form) {
  Batch b;
  const auto floats = [&](const char* name) -> const float* {
    if (!arrays.contains(name) || arrays[name].is_none()) return nullptr;
    b.keep.push_back(FloatArray::ensure(arrays[name]));
    if (!b.keep.back()) throw py::error_already_set();
    b.view.n = b.keep.back().shape(0);
    return b.keep.back().data();
  };
  b.view.vec = floats("vec");
  b.view.mean = floats("mean");
  b.view.weights = floats("weights");
  b.view.logp = floats("logp");
  if (arrays.contains("var") && !arrays["var"].is_none()) {
    VarianceForm form = VarianceForm::kVar;
    if (!ParseVarianceForm(var_form, &form)) {
      Raise(Status::InvalidArgument("unknown variance form '" + var_form + "'"));
    }
    FloatArray given = FloatArray::ensure(arrays["var"]);
    if (!given) throw py::error_already_set();
    FloatArray var(std::vector<py::ssize_t>(given.shape(), given.shape() + given.ndim()));
    const py::ssize_t n = given.ndim() > 0 ? given.shape(0) : 0;
    Check(ToVariance(form, given.data(), n, n > 0 ? given.size() / n : 0, var.mutable_data()));
    b.keep.push_back(var);
    b.view.var = var.data();
  }
  if (arrays.contains("codes") && !arrays["codes"].is_none()) {
    b.codes =
        py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(arrays["codes"]);
    if (!b.codes) throw py::error_already_set();
    b.view.n = b.codes.shape(0);
    b.view.codes = b.codes.data();
  }
  return b;
}

// encoders::EvaluateEmbeddings; queries None: leave-one-out over the items.
std::string EvaluateEmbeddingsOf(const std::string& kind, int dim, int components, int code_k,
                                 float match_a, float match_b, const py::dict& items,
                                 const LabelArray& labels, const py::object& queries,
                                 const py::object& query_labels, const std::string& var_form,
                                 const std::string& score, int samples, uint64_t seed,
                                 const std::vector<int>& ks, int knn_k, int eta_bins,
                                 bool fit_match_parameters, int64_t block_floats) {
  CollectionSpec spec;
  if (!ParseKind(kind, &spec.kind)) Raise(Status::InvalidArgument("unknown kind '" + kind + "'"));
  spec.dim = dim;
  spec.components = components;
  spec.code_k = code_k;
  spec.match_a = match_a;
  spec.match_b = match_b;
  spec.samples = DefaultSamples(spec.kind == Kind::kMog ? components : 1);
  encoders::EmbeddingEvaluationOptions options;
  if (!ParseScore(score, &options.score.score)) {
    Raise(Status::InvalidArgument("unknown score '" + score + "'"));
  }
  options.score.samples = samples;
  options.score.has_seed = true;
  options.score.seed = seed;
  options.eta_bins = eta_bins;
  options.block_floats = block_floats;
  options.fit_match_parameters = fit_match_parameters;
  const Batch item_batch = BatchOf(items, var_form);
  Batch query_batch;
  std::vector<int64_t> gallery = Labels(labels), probes = gallery;
  const bool separate = !queries.is_none();
  if (separate) {
    query_batch = BatchOf(queries.cast<py::dict>(), var_form);
    probes = Labels(LabelArray::ensure(query_labels));
  }
  options.retrieval = RetrievalOptionsOf(ks, knn_k, /*exclude_self=*/!separate);
  nlohmann::json report;
  Status s;
  {
    py::gil_scoped_release release;
    s = encoders::EvaluateEmbeddings(spec, separate ? query_batch.view : item_batch.view,
                                     item_batch.view, probes, gallery, options, &report);
  }
  Check(s);
  return report.dump();
}

}  // namespace
}  // namespace python
}  // namespace hedgedb

PYBIND11_MODULE(_encoders, m) {
  using hedgedb::python::PyModel;
  m.doc() = "hedgedb.encoders: embed images with a trained model file (docs/python.md)";
  py::class_<PyModel>(m, "Model", "A trained model file (hedgedb train --out), loaded.")
      .def(py::init<const std::string&, int>(), py::arg("path"), py::kw_only(),
           py::arg("threads") = 0, "Load a model file; threads: torch threads (0: all cores).")
      .def_property_readonly("spec", &PyModel::Spec,
                             "The model file's header (method, kind, sizes, input shape and "
                             "normalisation, backbone, training data) and search_score.")
      .def_property_readonly("create_kwargs", &PyModel::CreateKwargs,
                             "db.create_collection(name, **model.create_kwargs): the collection "
                             "ingest-images makes for this model (its metadata records the "
                             "model file).")
      .def_property_readonly(
          "calibration_map", &PyModel::CalibrationMap,
          "The model file's calibration map (bytes; None without one: train fits it on its "
          "validation split). db.import_calibration(name, model.calibration_map) makes a "
          "collection start calibrated, as ingest-images does.")
      .def_property_readonly("calibration", &PyModel::Calibration,
                             "What the model's calibration map was fitted on (score, method, "
                             "pairs, fit_base_rate, base_rate, samples, reason, ...: the fields of "
                             "db.stats()['calibrations']); None without one.")
      .def("embed_images", &PyModel::EmbedImages, py::arg("paths"), py::kw_only(),
           py::arg("fit") = "", py::arg("batch_size") = 256, py::arg("queries") = false,
           py::arg("db") = py::none(), py::arg("collection") = py::none(),
           "Decode, fit (exact, resize, crop; default: the training data's) and embed image "
           "files. Returns the keyword arrays of DB.ingest, or of DB.search with queries=True "
           "(codes models: logp tables). One unreadable image fails the call, naming it. "
           "With db and collection: refused when the collection holds another model's "
           "embeddings (as ingest-images and query-image refuse).")
      .def("embed_arrays", &PyModel::EmbedArrays, py::arg("inputs"), py::kw_only(),
           py::arg("batch_size") = 256, py::arg("queries") = false, py::arg("db") = py::none(),
           py::arg("collection") = py::none(),
           "Embed inputs of shape (n, *input_shape): uint8 pixels (scaled to [0, 1]) or "
           "float32 values as the model reads them. db, collection: as for embed_images.");
  // hedgedb.metrics' engine (python/hedgedb/metrics.py is the interface).
  m.def("_retrieval_from_similarity", &hedgedb::python::RetrievalFromSimilarity);
  // block_floats: the size of the score matrix blocks (tests make it small).
  m.def("_evaluate_embeddings", &hedgedb::python::EvaluateEmbeddingsOf, py::arg("kind"),
        py::arg("dim"), py::arg("components"), py::arg("code_k"), py::arg("match_a"),
        py::arg("match_b"), py::arg("items"), py::arg("labels"), py::arg("queries"),
        py::arg("query_labels"), py::arg("var_form"), py::arg("score"), py::arg("samples"),
        py::arg("seed"), py::arg("ks"), py::arg("knn_k"), py::arg("eta_bins"),
        py::arg("fit_match_parameters"),
        py::arg("block_floats") = hedgedb::encoders::EmbeddingEvaluationOptions().block_floats);
}
