// `import hedgedb`: the Python binding of the public C++ API (hedgedb/db.h),
// built with pybind11 as the extension module hedgedb._hedgedb; the package
// python/hedgedb/__init__.py re-exports it (docs/python.md).
//
// Arrays: a float32 (int32 codes, int64 ids and labels) C-contiguous NumPy
// array is used where it lies, without a copy; any other array or sequence
// is converted once (counted by _conversions(), which the tests read), by the
// command line's rules for .npy files (hedgedb/npy.h): integers exact or
// refused, float64 values float32 cannot hold refused. Every array's shape
// is checked against the collection's kind and sizes before the engine reads
// it, since EmbeddingView carries pointers only.
// The GIL is released while the engine ingests, searches, gets, removes and
// flushes; each call holds the database meanwhile (PyDB::Use), so close()
// waits for it. A Status error becomes hedgedb.Error (NotFoundError for NotFound,
// InvalidArgumentError for InvalidArgument) with the Status message.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hedgedb/arrays.h"
#include "hedgedb/db.h"
#include "hedgedb/fields.h"
#include "hedgedb/fuse.h"
#include "hedgedb/match_parameters.h"
#include "hedgedb/npy.h"
#include "hedgedb/score.h"

namespace py = pybind11;

namespace hedgedb {
namespace python {
namespace {

std::atomic<int64_t> g_conversions{0};

PyObject* g_error = nullptr;
PyObject* g_not_found = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_match_warning = nullptr;

[[noreturn]] void Raise(const Status& s) {
  PyObject* type = s.IsNotFound() ? g_not_found : s.IsInvalidArgument() ? g_invalid : g_error;
  PyErr_SetString(type, s.message().c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

// hedgedb.MatchParametersWarning with `note` (MatchParametersNote), if any,
// and where a Python user gets good values; raises when the warnings filter
// makes it an error.
void WarnMatchParameters(const std::string& note) {
  if (note.empty()) return;
  const std::string text =
      note +
      " (in Python: create_collection(name, **model.create_kwargs) for a hedgedb.encoders model, "
      "or match_a=, match_b= as hedgedb train prints them; db.calibrate fits them)";
  if (PyErr_WarnEx(g_match_warning, text.c_str(), 1) != 0) throw py::error_already_set();
}

[[noreturn]] void Invalid(const std::string& message) { Raise(Status::InvalidArgument(message)); }

// `obj` as a C-contiguous float32 array: the array itself when it already is
// one (no copy), else a converted copy, through float64 by the command
// line's rule (DoublesToFloat32: a value float32 cannot hold is refused, not
// turned into 0 or an infinity). `name` names the argument in errors.
py::array_t<float, py::array::c_style> AsFloatArray(const py::handle& obj, const char* name) {
  using Exact = py::array_t<float, py::array::c_style>;
  if (py::isinstance<Exact>(obj)) return py::reinterpret_borrow<Exact>(obj);
  py::array_t<double, py::array::c_style | py::array::forcecast> wide;
  try {
    wide = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(obj);
  } catch (const py::error_already_set&) {
    wide = {};
  }
  if (!wide) {
    PyErr_Clear();
    Invalid(std::string(name) + ": expected a numeric array");
  }
  Exact out(std::vector<py::ssize_t>(wide.shape(), wide.shape() + wide.ndim()));
  Check(DoublesToFloat32(wide.data(), size_t(wide.size()), name, out.mutable_data()));
  ++g_conversions;
  return out;
}

std::string ShapeText(const py::array& a) {
  std::string text = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) text += (i ? ", " : "") + std::to_string(a.shape(i));
  return text + (a.ndim() == 1 ? ",)" : ")");
}

// `obj` (an array or a sequence) as a C-contiguous array of the integer type
// T (int64 or int32), by the command line's rule for .npy integer files
// (NpyToInt64, NpyToInt32): integer dtypes of any width whose values fit,
// and float arrays whose values are all integers; a fraction, NaN, an
// infinity, a value out of range, bool and other dtypes are refused naming
// `name`. A C-contiguous array of T itself is used where it lies.
template <typename T>
py::array_t<T, py::array::c_style> AsIntArray(const py::handle& obj, const char* name) {
  static_assert(std::is_same<T, int64_t>::value || std::is_same<T, int32_t>::value, "int types");
  using Exact = py::array_t<T, py::array::c_style>;
  if (py::isinstance<Exact>(obj)) return py::reinterpret_borrow<Exact>(obj);
  const py::module_ np = py::module_::import("numpy");
  py::array a;
  try {
    a = py::reinterpret_borrow<py::array>(np.attr("asarray")(obj));
  } catch (const py::error_already_set&) {
    a = py::array();  // ragged or not a sequence: refused below
  }
  if (!a) Invalid(std::string(name) + ": expected an integer array");
  const py::dtype dtype = a.dtype();
  const std::string dtype_name = py::str(py::object(dtype)).cast<std::string>();
  // Native byte order, C order: the bytes the conversion reads (which also
  // refuses every dtype but the integer and float ones).
  a = np.attr("ascontiguousarray")(a, dtype.attr("newbyteorder")("="));
  const size_t count = size_t(a.size());
  std::vector<T> values;
  if constexpr (std::is_same<T, int64_t>::value) {
    Check(BufferToInt64(dtype.kind(), int(dtype.itemsize()), a.data(), count, name, dtype_name,
                        &values));
  } else {
    Check(BufferToInt32(dtype.kind(), int(dtype.itemsize()), a.data(), count, name, dtype_name,
                        &values));
  }
  Exact out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  ++g_conversions;
  return out;
}

// operator.index(obj), for objects that PyIndex_Check accepts.
py::int_ Index(const py::handle& obj) {
  PyObject* value = PyNumber_Index(obj.ptr());
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(value);
}

// A Python integer (or NumPy integer scalar) in [lo, hi]; floats, bools and
// other objects are refused naming `name`.
int64_t AsInt(const py::handle& obj, const char* name, int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (py::isinstance<py::bool_>(obj) || !PyIndex_Check(obj.ptr())) {
    Invalid(std::string(name) + ": expected an integer in " + range + ", got " +
            py::repr(obj).cast<std::string>());
  }
  const py::int_ value = Index(obj);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0 || v < lo || v > hi) {
    Invalid(std::string(name) + " must be in " + range + ", got " +
            py::str(py::object(value)).cast<std::string>());
  }
  return v;
}

// A seed: a Python integer in [0, 2^64).
uint64_t AsSeed(const py::handle& obj, const char* name) {
  if (py::isinstance<py::bool_>(obj) || !PyIndex_Check(obj.ptr())) {
    Invalid(std::string(name) + ": expected an integer in [0, 2**64), got " +
            py::repr(obj).cast<std::string>());
  }
  const py::int_ value = Index(obj);
  const unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    Invalid(std::string(name) + " must be in [0, 2**64), got " +
            py::str(py::object(value)).cast<std::string>());
  }
  return v;
}

// Checks that `a` has `dims` (-1: any, the row count n is dims[0]).
void CheckShape(const py::array& a, const char* name, const std::vector<py::ssize_t>& dims,
                const std::string& expected) {
  bool ok = a.ndim() == static_cast<py::ssize_t>(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i] < 0 || a.shape(i) == dims[i];
  if (!ok) Invalid(std::string(name) + ": expected shape " + expected + ", got " + ShapeText(a));
}

// The arrays of one batch of embeddings, kept alive while the engine reads
// them, and the view over them.
struct Embeddings {
  std::vector<py::object> keep;
  // Variances given in another form, converted (EmbeddingViewFromArrays);
  // shared so that the view's pointer survives copies of this struct.
  std::shared_ptr<std::vector<float>> converted_var = std::make_shared<std::vector<float>>();
  EmbeddingView view;
};

// Reads the keyword arrays of `kind` for a collection `spec`; queries of a
// codes collection are logp tables (n, d, k), items are codes (n, d). Which
// arrays the kind takes and their shapes are the library's rule
// (hedgedb/arrays.h, as for the command line's files); here the arguments
// are only converted to float32 / int32 and named. `subject` names arrays
// that come without a collection (score_matrix's "queries" and "items"
// dicts): errors then say queries['mean'], not mean, and the kind instead of
// the collection.
Embeddings ReadEmbeddings(const CollectionSpec& spec, bool queries, const py::object& vec,
                          const py::object& mean, const py::object& var, const py::object& weights,
                          const py::object& codes, const py::object& logp,
                          VarianceForm form = VarianceForm::kVar,
                          const std::string& subject = std::string()) {
  Embeddings e;
  const bool own = !subject.empty();
  auto label = [&](const char* name) {
    return own ? subject + "['" + name + "']" : std::string(name);
  };
  const std::string owner =
      own ? std::string(KindName(spec.kind)) + " " + subject
          : "the " + std::string(KindName(spec.kind)) + " collection '" + spec.name + "'";
  EmbeddingArrays arrays;
  arrays.var_form = form;
  struct Argument {
    EmbeddingArray* array;
    const py::object* obj;
    std::string name;
  };
  // The form the caller gave (queries['log_var']); a collection's arguments
  // keep saying var, and a missing one names the forms it may come in.
  const std::string var_name = (own ? label(VarianceFormName(form)) : std::string("var")) +
                               (var.is_none() ? " (or std, log_var, log_std)" : "");
  const Argument all[] = {
      {&arrays.vec, &vec, label("vec")},       {&arrays.mean, &mean, label("mean")},
      {&arrays.var, &var, var_name},           {&arrays.weights, &weights, label("weights")},
      {&arrays.codes, &codes, label("codes")}, {&arrays.logp, &logp, label("logp")}};
  for (const Argument& a : all) {
    a.array->given = !a.obj->is_none();
    a.array->name = a.name;
  }
  // Arguments the kind does not take are refused before any conversion.
  Check(CheckEmbeddingArraysGiven(spec.kind, queries, arrays, owner));
  for (const Argument& a : all) {
    if (!a.array->given) continue;
    py::array converted;
    if (a.array == &arrays.codes) {
      auto ints = AsIntArray<int32_t>(*a.obj, a.name.c_str());
      a.array->ints = ints.data();
      converted = ints;
    } else {
      auto floats = AsFloatArray(*a.obj, a.name.c_str());
      a.array->floats = floats.data();
      converted = floats;
    }
    a.array->shape.assign(converted.shape(), converted.shape() + converted.ndim());
    e.keep.push_back(converted);
  }
  Check(EmbeddingViewFromArrays(spec, queries, arrays, owner, e.converted_var.get(), &e.view));
  return e;
}

// The one variance argument among var, std, log_var, log_std, and its form.
std::pair<py::object, VarianceForm> VarianceArgument(const py::object& var, const py::object& stdev,
                                                     const py::object& log_var,
                                                     const py::object& log_std) {
  std::pair<py::object, VarianceForm> out{py::none(), VarianceForm::kVar};
  int given = 0;
  for (const auto& [obj, form] : {std::pair{&var, VarianceForm::kVar},
                                  {&stdev, VarianceForm::kStd},
                                  {&log_var, VarianceForm::kLogVar},
                                  {&log_std, VarianceForm::kLogStd}}) {
    if (obj->is_none()) continue;
    ++given;
    out = {*obj, form};
  }
  if (given > 1) Invalid("give the variances once: var, std, log_var or log_std");
  return out;
}

// Template fusion (hedgedb/fuse.h) of the n rows of (n, D) Gaussians: the
// fused mean and variances as two float32 (D,) arrays.
py::tuple FuseGaussiansOf(const py::object& mean, const py::object& var, const py::object& stdev,
                          const py::object& log_var, const py::object& log_std) {
  const auto [variance, form] = VarianceArgument(var, stdev, log_var, log_std);
  if (variance.is_none()) Invalid("fuse_gaussians needs var (or std, log_var, log_std)");
  // D comes from the means; ReadEmbeddings then checks both shapes.
  auto m = AsFloatArray(mean, "mean");
  CheckShape(m, "mean", {-1, -1}, "(n, D)");
  CollectionSpec spec;
  spec.kind = Kind::kGaussian;
  spec.dim = static_cast<int>(std::min<py::ssize_t>(m.shape(1), std::numeric_limits<int>::max()));
  Embeddings e = ReadEmbeddings(spec, false, py::none(), m, variance, py::none(), py::none(),
                                py::none(), form);
  std::vector<float> fused_mean, fused_var;
  Status s;
  {
    py::gil_scoped_release release;
    s = FuseGaussians(spec, e.view, &fused_mean, &fused_var);
  }
  Check(s);
  py::array_t<float> out_mean(static_cast<py::ssize_t>(fused_mean.size()));
  py::array_t<float> out_var(static_cast<py::ssize_t>(fused_var.size()));
  std::copy(fused_mean.begin(), fused_mean.end(), out_mean.mutable_data());
  std::copy(fused_var.begin(), fused_var.end(), out_var.mutable_data());
  return py::make_tuple(out_mean, out_var);
}

// The arrays of one side of score_matrix, `side` ("queries" or "items"): a
// dict of the keyword arrays search (queries) or ingest (items) takes.
struct SideArrays {
  py::object vec = py::none(), mean = py::none(), var = py::none(), weights = py::none(),
             codes = py::none(), logp = py::none();
  VarianceForm form = VarianceForm::kVar;
};

SideArrays SideOf(const py::object& obj, const char* side, bool queries) {
  if (!py::isinstance<py::dict>(obj)) {
    Invalid(std::string(side) + ": expected a dict of arrays (" +
            (queries ? "the keyword arrays search takes" : "the keyword arrays ingest takes") +
            "), got " + py::repr(py::type::of(obj)).cast<std::string>());
  }
  const py::dict arrays = obj.cast<py::dict>();
  const char* names[] = {"vec",     "mean",    "var",     "std",
                         "log_var", "log_std", "weights", queries ? "logp" : "codes"};
  auto get = [&](const char* name) {
    return arrays.contains(name) ? py::object(arrays[name]) : py::object(py::none());
  };
  for (auto [key, _] : arrays) {
    const std::string name = py::str(key).cast<std::string>();
    bool known = false;
    for (const char* n : names) known = known || name == n;
    if (!known) {
      Invalid(std::string(side) + ": unknown array '" + name +
              "' (expected vec, mean, var, std, log_var, log_std, weights, " +
              (queries ? "logp" : "codes") + ")");
    }
  }
  SideArrays out;
  const auto [variance, form] =
      VarianceArgument(get("var"), get("std"), get("log_var"), get("log_std"));
  out.vec = get("vec");
  out.mean = get("mean");
  out.var = variance;
  out.form = form;
  out.weights = get("weights");
  if (queries) {
    out.logp = get("logp");
  } else {
    out.codes = get("codes");
  }
  return out;
}

// numpy.shape(obj) without converting it; empty when obj has none.
std::vector<py::ssize_t> ShapeOf(const py::object& obj) {
  if (obj.is_none()) return {};
  return py::module_::import("numpy").attr("shape")(obj).cast<std::vector<py::ssize_t>>();
}

// hedgedb.score_matrix: ScoreMatrix (hedgedb/score.h) of the query and item
// arrays, the sizes read from the arrays. Returns the float32 (Q, N) scores.
py::array_t<float> ScoreMatrixOf(const std::string& kind, const py::object& queries_obj,
                                 const py::object& items_obj, const std::string& score, int samples,
                                 const py::object& seed, float match_a, float match_b) {
  CollectionSpec spec;
  if (!ParseKind(kind, &spec.kind)) {
    Invalid("unknown kind '" + kind + "' (expected point, gaussian, mog or codes)");
  }
  const SideArrays q = SideOf(queries_obj, "queries", true);
  const SideArrays it = SideOf(items_obj, "items", false);
  // D (d), C and k from the shapes; ReadEmbeddings then checks every array
  // against them, as a collection of these sizes would.
  const bool codes = spec.kind == Kind::kCodes;
  const py::object& main = spec.kind == Kind::kPoint ? it.vec : codes ? it.codes : it.mean;
  const std::vector<py::ssize_t> shape = ShapeOf(main);
  const size_t rank = spec.kind == Kind::kMog ? 3 : 2;
  const char* main_name = spec.kind == Kind::kPoint ? "vec" : codes ? "codes" : "mean";
  if (!main.is_none() && shape.size() != rank) {
    Invalid(std::string("items['") + main_name + "']: expected shape " +
            (rank == 3 ? "(n, C, D)"
             : codes   ? "(n, d)"
                       : "(n, D)") +
            ", got " + py::str(py::tuple(py::cast(shape))).cast<std::string>());
  }
  auto clamp = [](py::ssize_t v) {
    return int(std::min<py::ssize_t>(v, std::numeric_limits<int>::max()));
  };
  if (!shape.empty()) {
    spec.dim = clamp(shape.back());
    if (spec.kind == Kind::kMog) spec.components = clamp(shape[1]);
  }
  if (codes) {
    const std::vector<py::ssize_t> logp = ShapeOf(q.logp);
    if (logp.size() == 3) spec.code_k = clamp(logp[2]);
  }
  spec.match_a = match_a;
  spec.match_b = match_b;
  if (samples < 0) {
    Invalid("samples must be >= 0 (0: the default), got " + std::to_string(samples));
  }
  // A collection's defaults: K = 8 (mog 4C), seed 0.
  spec.samples = samples > 0 ? samples : DefaultSamples(spec.components);
  spec.seed = AsSeed(seed, "seed");
  ScoreOptions options;
  if (!score.empty() && !ParseScore(score, &options.score)) {
    Invalid("unknown score '" + score + "' (expected mc, csd, mls, l2, match or logprob)");
  }
  Embeddings items = ReadEmbeddings(spec, false, it.vec, it.mean, it.var, it.weights, it.codes,
                                    py::none(), it.form, "items");
  Embeddings queries = ReadEmbeddings(spec, true, q.vec, q.mean, q.var, q.weights, py::none(),
                                      q.logp, q.form, "queries");
  std::vector<float> scores;
  Status s;
  {
    py::gil_scoped_release release;
    s = ScoreMatrix(spec, queries.view, items.view, options, &scores);
  }
  Check(s);
  py::array_t<float> out(
      {static_cast<py::ssize_t>(queries.view.n), static_cast<py::ssize_t>(items.view.n)});
  std::copy(scores.begin(), scores.end(), out.mutable_data());
  return out;
}

// Writes the fields hedgedb/fields.h visits into a dict (the CLI's
// JSON follows the same list; NaN stays NaN here, null there).
struct DictFields {
  py::dict* d;
  void operator()(const char* name, double v) const { (*d)[name] = v; }
  void operator()(const char* name, float v) const { (*d)[name] = v; }
  void operator()(const char* name, int64_t v) const { (*d)[name] = v; }
  void operator()(const char* name, uint64_t v) const { (*d)[name] = v; }
  void operator()(const char* name, Kind v) const { (*d)[name] = KindName(v); }
  void operator()(const char* name, bool v) const { (*d)[name] = v; }
  void operator()(const char* name, const std::string& v) const { (*d)[name] = v; }
  void operator()(const char* name, ScoreType v) const { (*d)[name] = ScoreName(v); }
  void operator()(const char* name, const CalibrationQuality& v) const { (*d)[name] = Dict(v); }
  // Lists of structs (eta quartiles, stored maps): a dict each.
  template <typename T>
  void operator()(const char* name, const std::vector<T>& items) const {
    py::list list;
    for (const T& item : items) list.append(Dict(item));
    (*d)[name] = list;
  }
  template <typename T>
  static py::dict Dict(const T& v) {
    py::dict out;
    VisitFields(v, DictFields{&out});
    return out;
  }
};

// A spec as a dict: every field (hedgedb/fields.h), and "index", the name
// of create_collection's argument, beside "index_factory".
py::dict SpecDict(const CollectionSpec& s) {
  py::dict d;
  VisitFields(s, DictFields{&d});
  d["index"] = s.index_factory;
  return d;
}

// Top-k results of Q queries as (Q, k) arrays; rows with fewer hits are
// padded with id -1 and NaN.
struct SearchResults {
  py::array_t<int64_t> ids;
  py::array_t<float> scores, probs, uncertainties, std_errors;
  py::array_t<int64_t> labels;  // -1 where an item has no label
  py::array_t<float> query_uncertainty;
  py::list payloads;  // with with_payload: Q lists of bytes
  py::array_t<int64_t> scored;
  py::array_t<int64_t> passing;  // with a filter: items that pass it; -1 without
};

class PyDB {
 public:
  explicit PyDB(std::unique_ptr<DB> db, std::string path) : db_(std::move(db)), path_(path) {}

  // The database for one call: every call holds a Use for as long as it
  // touches the database, across the GIL's release too. close() marks the
  // database closed (later calls raise), waits until no Use is left, then
  // destroys it: a call in flight on another thread finishes first.
  class Use {
   public:
    Use(PyDB* owner, DB* db) : owner_(owner), db_(db) {}
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    ~Use() {
      std::lock_guard<std::mutex> lock(owner_->mutex_);
      if (--owner_->active_ == 0) owner_->idle_.notify_all();
    }
    DB* operator->() const { return db_; }

   private:
    PyDB* owner_;
    DB* db_;
  };

  // Called with the GIL held; raises hedgedb.Error once the database is
  // closed.
  Use Enter() {
    DB* db = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (db_ != nullptr) {
        ++active_;
        db = db_.get();
      }
    }
    if (db == nullptr) Raise(Status::IOError("the database '" + path_ + "' is closed"));
    return Use(this, db);
  }

  void Close() {
    std::unique_ptr<DB> db;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      db = std::move(db_);  // from here on calls raise
    }
    if (db == nullptr) return;
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return active_ == 0; });
    lock.unlock();
    db.reset();  // flushes
  }

  CollectionSpec Describe(const std::string& name) {
    CollectionSpec spec;
    Check(Enter()->DescribeCollection(name, &spec));
    return spec;
  }

  void Create(const std::string& name, const std::string& kind, int dim, int components, int code_k,
              const std::string& index, float match_a, float match_b, int samples,
              const py::object& seed, const std::string& metadata, const std::string& row_format) {
    CollectionSpec spec;
    spec.name = name;
    if (!ParseKind(kind, &spec.kind)) {
      Invalid("unknown kind '" + kind + "' (expected point, gaussian, mog or codes)");
    }
    if (!ParseRowFormat(row_format, &spec.row_format)) {
      Invalid("unknown row_format '" + row_format + "' (expected float32, float16 or bfloat16)");
    }
    spec.dim = dim;
    spec.components = spec.kind == Kind::kMog ? components : 1;
    if (spec.kind != Kind::kMog && components != 1) {
      Invalid("components applies to mog collections only");
    }
    spec.code_k = code_k;
    spec.index_factory = index;
    spec.match_a = match_a;
    spec.match_b = match_b;
    if (samples < 0) {
      Invalid("samples must be >= 0 (0: the default), got " + std::to_string(samples));
    }
    spec.samples = samples > 0 ? samples : DefaultSamples(spec.components);
    spec.seed = AsSeed(seed, "seed");
    spec.metadata = metadata;
    Check(Enter()->CreateCollection(spec));
    WarnMatchParameters(MatchParametersNote(spec));
  }

  py::array_t<int64_t> Ingest(const std::string& collection, const py::object& vec,
                              const py::object& mean, const py::object& var,
                              const py::object& stdev, const py::object& log_var,
                              const py::object& log_std, const py::object& weights,
                              const py::object& codes, const py::object& ids,
                              const py::object& labels, const py::object& payloads,
                              const std::string& token, bool upsert) {
    const CollectionSpec spec = Describe(collection);
    const auto [variance, form] = VarianceArgument(var, stdev, log_var, log_std);
    Embeddings e =
        ReadEmbeddings(spec, false, vec, mean, variance, weights, codes, py::none(), form);
    const py::ssize_t n = e.view.n;
    IngestBatch batch;
    batch.data = e.view;
    batch.token = token;
    batch.upsert = upsert;
    if (!ids.is_none()) {
      auto a = AsIntArray<int64_t>(ids, "ids");
      CheckShape(a, "ids", {n}, "(" + std::to_string(n) + ",)");
      batch.ids = a.data();
      e.keep.push_back(a);
    }
    std::vector<uint8_t> has_labels;
    if (!labels.is_none()) {
      auto a = Labels(labels, &has_labels);
      CheckShape(a, "labels", {n}, "(" + std::to_string(n) + ",)");
      batch.labels = a.data();
      if (!has_labels.empty()) batch.has_labels = has_labels.data();
      e.keep.push_back(a);
    }
    std::vector<std::string> texts;
    if (!payloads.is_none()) {
      for (const py::handle& p : payloads) {
        if (py::isinstance<py::bytes>(p)) {
          texts.push_back(p.cast<std::string>());
        } else if (py::isinstance<py::str>(p)) {
          texts.push_back(p.cast<std::string>());
        } else {
          Invalid("payloads: expected str or bytes items");
        }
      }
      if (static_cast<py::ssize_t>(texts.size()) != n) {
        Invalid("payloads: expected " + std::to_string(n) + " items, got " +
                std::to_string(texts.size()));
      }
      batch.payloads = texts.data();
    }
    std::vector<int64_t> written;
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->Ingest(collection, batch, &written);
    }
    Check(s);
    py::array_t<int64_t> out(static_cast<py::ssize_t>(written.size()));
    std::copy(written.begin(), written.end(), out.mutable_data());
    return out;
  }

  SearchResults Search(const std::string& collection, const py::object& vec, const py::object& mean,
                       const py::object& var, const py::object& stdev, const py::object& log_var,
                       const py::object& log_std, const py::object& weights, const py::object& logp,
                       const py::object& k_obj, const std::string& score, int samples,
                       const py::object& seed, bool exhaustive, int64_t candidates, int nprobe,
                       int ef_search, bool with_uncertainty, bool with_payload,
                       bool adaptive_samples, double min_prob, int64_t max_results, double coverage,
                       bool coverage_by_eta, double max_false_match_rate, double confidence,
                       const py::object& labels_in, const py::object& labels_not_in,
                       const py::object& payload_equals) {
    const CollectionSpec spec = Describe(collection);
    const auto [variance, form] = VarianceArgument(var, stdev, log_var, log_std);
    Embeddings e = ReadEmbeddings(spec, true, vec, mean, variance, weights, py::none(), logp, form);
    SearchOptions options;
    const int k =
        int(AsInt(k_obj, "k", std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    options.k = k;
    if (!score.empty() && !ParseScore(score, &options.score)) {
      Invalid("unknown score '" + score + "' (expected mc, csd, mls, l2, match or logprob)");
    }
    options.samples = samples;
    if (!seed.is_none()) {
      options.has_seed = true;
      options.seed = AsSeed(seed, "seed");
    }
    options.exhaustive = exhaustive;
    options.candidates = candidates;
    options.nprobe = nprobe;
    options.ef_search = ef_search;
    options.with_uncertainty = with_uncertainty;
    options.with_payload = with_payload;
    options.adaptive_samples = adaptive_samples;
    options.min_prob = min_prob;
    options.max_results = max_results;
    options.coverage = coverage;
    options.coverage_by_eta = coverage_by_eta;
    options.max_false_match_rate = max_false_match_rate;
    options.confidence = confidence;
    SearchFilter& filter = options.filter;
    if (!labels_in.is_none() && !labels_not_in.is_none()) {
      Invalid("give labels_in or labels_not_in, not both");
    }
    if (!labels_in.is_none() || !labels_not_in.is_none()) {
      const bool in = !labels_in.is_none();
      filter.label_rule = in ? SearchFilter::LabelRule::kIn : SearchFilter::LabelRule::kNotIn;
      const char* name = in ? "labels_in" : "labels_not_in";
      auto a = AsIntArray<int64_t>(in ? labels_in : labels_not_in, name);
      if (a.ndim() != 1)
        Invalid(std::string(name) + ": expected a 1-D array, got shape " + ShapeText(a));
      filter.labels.assign(a.data(), a.data() + a.shape(0));
    }
    if (!payload_equals.is_none()) {
      if (!py::isinstance<py::dict>(payload_equals)) {
        Invalid("payload_equals: expected a dict of field -> value");
      }
      const py::object dumps = py::module_::import("json").attr("dumps");
      const py::object numpy_scalar = py::module_::import("numpy").attr("generic");
      for (auto [field, item] : payload_equals.cast<py::dict>()) {
        if (!py::isinstance<py::str>(field)) Invalid("payload_equals: field names must be str");
        // NumPy scalars (np.int64(3), np.str_) as their Python values.
        py::object value = py::reinterpret_borrow<py::object>(item);
        if (py::isinstance(value, numpy_scalar)) value = value.attr("item")();
        if (!value.is_none() && !py::isinstance<py::str>(value) &&
            !py::isinstance<py::bool_>(value) && !py::isinstance<py::int_>(value) &&
            !py::isinstance<py::float_>(value)) {
          Invalid("payload_equals['" + field.cast<std::string>() +
                  "']: expected str, int, float, bool or None");
        }
        filter.payload_equals.emplace_back(field.cast<std::string>(),
                                           dumps(value).cast<std::string>());
      }
    }
    std::vector<SearchResult> results;
    Status s;
    int64_t items = 0;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      CollectionStats stats;
      s = use->GetStats(collection, &stats);
      items = stats.items;
      if (s.ok()) s = use->Search(collection, e.view, options, &results);
    }
    Check(s);
    // As the CLI: after a search that worked, what its numbers are worth.
    WarnMatchParameters(MatchParametersNote(spec, options.score, with_uncertainty));
    const py::ssize_t q = static_cast<py::ssize_t>(results.size());
    // k columns, but never more than the collection had items: a k of 10^9
    // asks for no 10^9 columns of padding (and hits can only be more if an
    // ingest landed between the count and the search). Threshold and
    // conformal searches: as many as the longest answer.
    const bool threshold = min_prob > 0 || coverage > 0 || max_false_match_rate > 0;
    py::ssize_t width = threshold ? 0 : std::min<int64_t>(k, items);
    for (const SearchResult& r : results) {
      width = std::max<py::ssize_t>(width, static_cast<py::ssize_t>(r.hits.size()));
    }
    SearchResults out;
    out.ids = py::array_t<int64_t>({q, width});
    out.scores = py::array_t<float>({q, width});
    out.probs = py::array_t<float>({q, width});
    out.uncertainties = py::array_t<float>({q, width});
    out.std_errors = py::array_t<float>({q, width});
    out.labels = py::array_t<int64_t>({q, width});
    out.query_uncertainty = py::array_t<float>(q);
    out.scored = py::array_t<int64_t>(q);
    out.passing = py::array_t<int64_t>(q);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto ids = out.ids.mutable_unchecked<2>();
    auto scores = out.scores.mutable_unchecked<2>();
    auto probs = out.probs.mutable_unchecked<2>();
    auto unc = out.uncertainties.mutable_unchecked<2>();
    auto se = out.std_errors.mutable_unchecked<2>();
    auto labels = out.labels.mutable_unchecked<2>();
    for (py::ssize_t i = 0; i < q; ++i) {
      const SearchResult& r = results[size_t(i)];
      out.query_uncertainty.mutable_at(i) = r.query_uncertainty;
      out.scored.mutable_at(i) = r.scored;
      out.passing.mutable_at(i) = r.passing;
      py::list row_payloads;
      for (py::ssize_t j = 0; j < width; ++j) {
        const bool hit = j < static_cast<py::ssize_t>(r.hits.size());
        const SearchHit* h = hit ? &r.hits[size_t(j)] : nullptr;
        ids(i, j) = hit ? h->id : -1;
        scores(i, j) = hit ? h->score : nan;
        probs(i, j) = hit ? h->prob : nan;
        unc(i, j) = hit ? h->uncertainty : nan;
        se(i, j) = hit ? h->std_error : nan;
        labels(i, j) = hit && h->has_label ? h->label : -1;
        if (with_payload && hit) row_payloads.append(py::bytes(h->payload));
      }
      if (with_payload) out.payloads.append(row_payloads);
    }
    return out;
  }

  py::list Get(const std::string& collection, const py::object& ids_obj) {
    auto ids = AsIntArray<int64_t>(ids_obj, "ids");
    if (ids.ndim() != 1) Invalid("ids: expected a 1-D array, got shape " + ShapeText(ids));
    std::vector<Record> records;
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->Get(collection, ids.data(), static_cast<size_t>(ids.shape(0)), &records);
    }
    Check(s);
    py::list out;
    auto floats = [](const std::vector<float>& v) {
      py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
      std::copy(v.begin(), v.end(), a.mutable_data());
      return a;
    };
    for (const Record& r : records) {
      py::dict d;
      d["id"] = r.id;
      d["found"] = r.found;
      if (r.found) {
        d["label"] = r.has_label ? py::object(py::int_(r.label)) : py::object(py::none());
        d["payload"] = py::bytes(r.payload);
        if (!r.vec.empty()) d["vec"] = floats(r.vec);
        if (!r.mean.empty()) d["mean"] = floats(r.mean);
        if (!r.var.empty()) d["var"] = floats(r.var);
        if (!r.weights.empty()) d["weights"] = floats(r.weights);
        if (!r.codes.empty()) {
          py::array_t<int32_t> c(static_cast<py::ssize_t>(r.codes.size()));
          std::copy(r.codes.begin(), r.codes.end(), c.mutable_data());
          d["codes"] = c;
        }
      }
      out.append(d);
    }
    return out;
  }

  int64_t Remove(const std::string& collection, const py::object& ids_obj) {
    auto ids = AsIntArray<int64_t>(ids_obj, "ids");
    if (ids.ndim() != 1) Invalid("ids: expected a 1-D array, got shape " + ShapeText(ids));
    int64_t removed = 0;
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->Remove(collection, ids.data(), static_cast<size_t>(ids.shape(0)), &removed);
    }
    Check(s);
    return removed;
  }

  py::array_t<int64_t> ListIds(const std::string& collection) {
    std::vector<int64_t> ids;
    Check(Enter()->ListIds(collection, &ids));
    py::array_t<int64_t> out(static_cast<py::ssize_t>(ids.size()));
    std::copy(ids.begin(), ids.end(), out.mutable_data());
    return out;
  }

  // DB::Calibrate: the collection's own labelled items as queries, or
  // held-out queries (the search layout) with query_labels. The CLI's
  // `calibrate` and this refuse the same input (docs/python.md).
  py::dict Calibrate(const std::string& collection, const py::object& vec, const py::object& mean,
                     const py::object& var, const py::object& stdev, const py::object& log_var,
                     const py::object& log_std, const py::object& weights, const py::object& logp,
                     const py::object& query_labels, const std::string& score, int samples,
                     const py::object& seed, int64_t max_pairs, uint64_t sample_seed,
                     int64_t top_ranks, double conformal_fraction, bool unconditional, bool dry_run,
                     const std::string& match_parameters) {
    const CollectionSpec spec = Describe(collection);
    CalibrateOptions o;
    if (!score.empty() && !ParseScore(score, &o.score)) {
      Invalid("unknown score '" + score + "' (expected mc, csd, mls, l2, match or logprob)");
    }
    if (samples < 0)
      Invalid("samples must be > 0 (or 0: the collection's), got " + std::to_string(samples));
    if (max_pairs < 1) Invalid("max_pairs must be >= 1, got " + std::to_string(max_pairs));
    if (top_ranks < 0) Invalid("top_ranks must be >= 0, got " + std::to_string(top_ranks));
    o.samples = samples;
    if (!seed.is_none()) {
      o.has_seed = true;
      o.seed = AsSeed(seed, "seed");
    }
    o.max_pairs = max_pairs;
    o.sample_seed = sample_seed;
    o.top_ranks = top_ranks;
    if (!(conformal_fraction >= 0 && conformal_fraction < 1)) {
      Invalid("conformal_fraction must be in [0, 1), got " + std::to_string(conformal_fraction));
    }
    o.conformal_fraction = conformal_fraction;
    o.unconditional = unconditional;
    o.dry_run = dry_run;
    if (!ParseMatchParameters(match_parameters, &o.match_parameters)) {
      Invalid("match_parameters must be 'auto', 'fit' or 'keep', got '" + match_parameters + "'");
    }
    const bool held_out = !vec.is_none() || !mean.is_none() || !logp.is_none();
    if (held_out != !query_labels.is_none()) {
      Invalid("held-out queries need query_labels, and query_labels needs the queries");
    }
    Embeddings e;
    std::vector<int64_t> labels;
    if (held_out) {
      const auto [variance, form] = VarianceArgument(var, stdev, log_var, log_std);
      e = ReadEmbeddings(spec, true, vec, mean, variance, weights, py::none(), logp, form);
      auto a = AsIntArray<int64_t>(query_labels, "query_labels");
      if (a.ndim() != 1 || a.shape(0) != static_cast<py::ssize_t>(e.view.n)) {
        Invalid("query_labels: expected shape (" + std::to_string(e.view.n) + ",), got " +
                ShapeText(a));
      }
      labels.assign(a.data(), a.data() + a.shape(0));
      o.queries = e.view;
      o.query_labels = labels.data();
    } else if (!var.is_none() || !stdev.is_none() || !log_var.is_none() || !log_std.is_none() ||
               !weights.is_none()) {
      Invalid("var, std, log_var, log_std and weights belong to held-out queries (mean or vec)");
    }
    CalibrationReport report;
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->Calibrate(collection, o, &report);
    }
    Check(s);
    py::dict out;
    VisitFields(report, DictFields{&out});
    return out;
  }

  // DB::ImportCalibration: a map fitted elsewhere (a model file's:
  // hedgedb.encoders.Model.calibration_map), as ingest-images stores the
  // model's map into the collection it creates (base rate 0: the map's own).
  void ImportCalibration(const std::string& collection, const py::object& map, double base_rate) {
    if (map.is_none()) {
      Invalid(
          "no calibration map to import (a model file carries one when `hedgedb train` had a "
          "validation split, --val-fraction > 0; else fit one with db.calibrate)");
    }
    if (!py::isinstance<py::bytes>(map)) {
      Invalid("map: expected bytes (an encoded calibration map), got " +
              py::repr(py::type::of(map)).cast<std::string>());
    }
    if (!(base_rate == 0 || (base_rate > 0 && base_rate < 1))) {
      Invalid("base_rate must be in (0, 1), or 0 to keep the map's own, got " +
              py::repr(py::float_(base_rate)).cast<std::string>());
    }
    const std::string bytes = map.cast<std::string>();
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->ImportCalibration(collection, bytes, base_rate);
    }
    Check(s);
  }

  py::dict Stats(const std::string& collection) {
    CollectionStats st;
    Check(Enter()->GetStats(collection, &st));
    py::dict d;
    VisitFields(st, DictFields{&d});
    d["index"] = st.spec.index_factory;  // as SpecDict
    return d;
  }

  // Seconds per single-query Search through the C++ API, no Python between
  // calls: the baseline that bench/python_overhead.py compares db.search
  // against in the same process. Queries are searched one at a time,
  // `repeats` rounds.
  double NativeSearchSeconds(const std::string& collection, const py::object& vec,
                             const py::object& mean, const py::object& var, int k, int repeats) {
    const CollectionSpec spec = Describe(collection);
    if (spec.kind != Kind::kPoint && spec.kind != Kind::kGaussian) {
      Invalid("_native_search_seconds takes point and gaussian collections");
    }
    Embeddings e = ReadEmbeddings(spec, true, vec, mean, var, py::none(), py::none(), py::none());
    SearchOptions options;
    options.k = k;
    const int64_t n = e.view.n, d = spec.dim;
    std::vector<SearchResult> results;
    Status s;
    double seconds = 0;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < repeats && s.ok(); ++r) {
        for (int64_t q = 0; q < n && s.ok(); ++q) {
          EmbeddingView one = e.view;
          one.n = 1;
          if (one.vec) one.vec += q * d;
          if (one.mean) one.mean += q * d;
          if (one.var) one.var += q * d;
          s = use->Search(collection, one, options, &results);
        }
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    Check(s);
    return seconds / double(std::max<int64_t>(1, n * repeats));
  }

  void Flush() {
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->Flush();
    }
    Check(s);
  }

  void CatchUp() {
    Status s;
    {
      Use use = Enter();
      py::gil_scoped_release release;
      s = use->CatchUp();
    }
    Check(s);
  }

 private:
  // labels: an integer array, or a sequence whose None items have no label
  // (`has_labels` then holds a flag per item; empty: all have one).
  static py::array_t<int64_t, py::array::c_style> Labels(const py::object& labels,
                                                         std::vector<uint8_t>* has_labels) {
    has_labels->clear();
    const bool array = py::isinstance<py::array>(labels);
    if ((array && labels.attr("dtype").attr("kind").cast<std::string>() != "O") ||
        !py::isinstance<py::sequence>(labels) || py::isinstance<py::str>(labels) ||
        py::isinstance<py::bytes>(labels)) {
      return AsIntArray<int64_t>(labels, "labels");
    }
    py::list values;
    bool any_none = false;
    for (const py::handle& item : labels) {
      const bool none = item.is_none();
      any_none = any_none || none;
      has_labels->push_back(none ? 0 : 1);
      values.append(none ? py::object(py::int_(0)) : py::reinterpret_borrow<py::object>(item));
    }
    if (!any_none) has_labels->clear();
    return AsIntArray<int64_t>(values, "labels");
  }

  std::mutex mutex_;
  std::condition_variable idle_;
  int64_t active_ = 0;  // Uses alive
  std::unique_ptr<DB> db_;
  std::string path_;
};

}  // namespace
}  // namespace python
}  // namespace hedgedb

PYBIND11_MODULE(_hedgedb, m) {
  using namespace hedgedb;
  using namespace hedgedb::python;
  m.doc() = "hedgedb: a vector database for uncertain embeddings (docs/python.md)";
  // Created once and kept for the process (the module is never unloaded).
  auto exception = [&](const char* name, const char* doc, py::tuple bases) {
    PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases.ptr(), nullptr);
    if (type == nullptr) throw py::error_already_set();
    m.attr(std::string(name).substr(std::string("hedgedb.").size()).c_str()) =
        py::reinterpret_borrow<py::object>(type);
    return type;
  };
  g_error = exception("hedgedb.Error", "A hedgedb error; the message is the engine's.",
                      py::make_tuple(py::handle(PyExc_Exception)));
  g_not_found = exception("hedgedb.NotFoundError", "A collection that does not exist.",
                          py::make_tuple(py::handle(g_error), py::handle(PyExc_KeyError)));
  // KeyError quotes its message; print it as the engine wrote it.
  py::setattr(g_not_found, "__str__",
              py::handle(reinterpret_cast<PyObject*>(PyExc_Exception)).attr("__str__"));
  g_invalid = exception("hedgedb.InvalidArgumentError", "Bad input: shapes, values, options.",
                        py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError)));
  g_match_warning = exception(
      "hedgedb.MatchParametersWarning",
      "A collection's match_a/match_b cannot express a match (match_b <= 0, the default): mc "
      "and match scores stay below 0.5 and every eta is at least 0.5. The message names the fix.",
      py::make_tuple(py::handle(PyExc_UserWarning)));

  m.def(
      "_conversions", [] { return g_conversions.load(); },
      "Arrays converted (copied) so far because they were not C-contiguous arrays of the "
      "dtype the engine reads (float32; int32 codes; int64 ids and labels).");

  m.def(
      "_as_int64",
      [](const py::object& obj, const std::string& name) {
        return AsIntArray<int64_t>(obj, name.c_str());
      },
      py::arg("obj"), py::arg("name"),
      "obj as an int64 array by the rule ingest, get and remove read ids with (integers that "
      "fit; floats only when every value is an integer); InvalidArgumentError naming `name` "
      "otherwise. For hedgedb.dask, which routes by id before a shard sees it.");

  py::class_<SearchResults>(m, "SearchResults",
                            "Top-k results of Q queries: (Q, k) arrays, best first; rows with "
                            "fewer hits are padded with id -1 and NaN.")
      .def_readonly("ids", &SearchResults::ids, "int64 (Q, k) ids; -1 pads")
      .def_readonly("scores", &SearchResults::scores, "float32 (Q, k) scores of the score used")
      .def_readonly("probs", &SearchResults::probs,
                    "float32 (Q, k) calibrated P(same label); NaN without a calibration")
      .def_readonly("uncertainties", &SearchResults::uncertainties,
                    "float32 (Q, k) eta of each result (gaussian, mog); NaN otherwise")
      .def_readonly("std_errors", &SearchResults::std_errors,
                    "float32 (Q, k) Monte Carlo standard error of each mc score; NaN otherwise")
      .def_readonly("labels", &SearchResults::labels, "int64 (Q, k) labels; -1 where none")
      .def_readonly("query_uncertainty", &SearchResults::query_uncertainty,
                    "float32 (Q,) eta of each query; NaN for kinds without one")
      .def_readonly("payloads", &SearchResults::payloads,
                    "with with_payload=True: Q lists of bytes")
      .def_readonly("scored", &SearchResults::scored, "int64 (Q,) items scored exactly")
      .def_readonly("passing", &SearchResults::passing,
                    "int64 (Q,) with a filter: how many items pass it (fewer than k: the hits "
                    "are exactly those); -1 without a filter")
      .def("__len__", [](const SearchResults& r) { return r.ids.shape(0); })
      .def("__repr__", [](const SearchResults& r) {
        // The shape, then each of the first queries' best hit: what a user
        // at the prompt wants to see without indexing the arrays.
        const py::ssize_t q = r.ids.shape(0), k = r.ids.ndim() > 1 ? r.ids.shape(1) : 0;
        auto ids = r.ids.unchecked<2>();
        auto scores = r.scores.unchecked<2>();
        auto probs = r.probs.unchecked<2>();
        std::string out =
            "SearchResults(" + std::to_string(q) + " queries x " + std::to_string(k) + " results";
        for (py::ssize_t i = 0; i < std::min<py::ssize_t>(q, 3) && k > 0; ++i) {
          char hit[128];
          if (ids(i, 0) < 0) {
            std::snprintf(hit, sizeof(hit), "; query %zd: no hit", static_cast<ssize_t>(i));
          } else {
            std::snprintf(hit, sizeof(hit), "; query %zd: best id %lld score %.4g prob %.3g",
                          static_cast<ssize_t>(i), static_cast<long long>(ids(i, 0)),
                          double(scores(i, 0)), double(probs(i, 0)));
          }
          out += hit;
        }
        if (q > 3) out += "; ...";
        return out + ")";
      });

  py::class_<PyDB>(m, "DB", "An open hedgedb database (hedgedb.open).")
      .def("close", &PyDB::Close, "Flush and close; later calls raise hedgedb.Error.")
      .def("__enter__", [](PyDB& self) -> PyDB& { return self; })
      .def("__exit__", [](PyDB& self, py::args) { self.Close(); })
      .def("create_collection", &PyDB::Create, py::arg("name"), py::arg("kind"), py::arg("dim"),
           py::arg("components") = 1, py::arg("code_k") = 0, py::arg("index") = "",
           py::arg("match_a") = 1.0f, py::arg("match_b") = 0.0f, py::arg("samples") = 0,
           py::arg("seed") = py::int_(0), py::arg("metadata") = "",
           py::arg("row_format") = "float32",
           "Create a collection: kind point, gaussian, mog or codes; dim D (codes: d); "
           "components C (mog); code_k (codes); index: a FAISS factory string (empty: the "
           "kind's default); match_a, match_b: p = sigmoid(-a ||z1 - z2|| + b); samples: "
           "Monte Carlo K per side (0: 8, mog 4C); row_format: float32, float16 or bfloat16, "
           "how item rows store means and variances (half the memory; values rounded to "
           "nearest, get returns the rounded values; float16 refuses values beyond its range "
           "and variances that would round to 0, at or below 2^-25).")
      .def(
          "drop_collection",
          [](PyDB& self, const std::string& name) { Check(self.Enter()->DropCollection(name)); },
          py::arg("name"))
      .def(
          "list_collections",
          [](PyDB& self) {
            std::vector<std::string> names;
            Check(self.Enter()->ListCollections(&names));
            return names;
          },
          "Names of the collections, sorted.")
      .def(
          "describe",
          [](PyDB& self, const std::string& name) { return SpecDict(self.Describe(name)); },
          py::arg("name"), "The collection's spec as a dict.")
      .def("ingest", &PyDB::Ingest, py::arg("collection"), py::kw_only(),
           py::arg("vec") = py::none(), py::arg("mean") = py::none(), py::arg("var") = py::none(),
           py::arg("std") = py::none(), py::arg("log_var") = py::none(),
           py::arg("log_std") = py::none(), py::arg("weights") = py::none(),
           py::arg("codes") = py::none(), py::arg("ids") = py::none(),
           py::arg("labels") = py::none(), py::arg("payloads") = py::none(), py::arg("token") = "",
           py::arg("upsert") = false,
           "Write one batch atomically; returns the int64 ids written. point: vec (n, D); "
           "gaussian: mean, var (n, D); mog: mean, var (n, C, D), weights (n, C) or None "
           "(instead of var: std, log_var or log_std, converted once); "
           "codes: codes (n, d) int32. ids (n,) int64 or None (continue after the largest), "
           "labels (n,) int64 (None items: no label), payloads: n str/bytes, token: makes a retry "
           "idempotent, "
           "upsert: replace the items whose ids exist (needs ids; in the same atomic batch).")
      .def("search", &PyDB::Search, py::arg("collection"), py::kw_only(),
           py::arg("vec") = py::none(), py::arg("mean") = py::none(), py::arg("var") = py::none(),
           py::arg("std") = py::none(), py::arg("log_var") = py::none(),
           py::arg("log_std") = py::none(), py::arg("weights") = py::none(),
           py::arg("logp") = py::none(), py::arg("k") = py::int_(10), py::arg("score") = "",
           py::arg("samples") = 0, py::arg("seed") = py::none(), py::arg("exhaustive") = false,
           py::arg("candidates") = 0, py::arg("nprobe") = 0, py::arg("ef_search") = 0,
           py::arg("with_uncertainty") = true, py::arg("with_payload") = false,
           py::arg("adaptive_samples") = false, py::arg("min_prob") = 0.0,
           py::arg("max_results") = 1000, py::arg("coverage") = 0.0,
           py::arg("coverage_by_eta") = false, py::arg("max_false_match_rate") = 0.0,
           py::arg("confidence") = 0.95, py::arg("labels_in") = py::none(),
           py::arg("labels_not_in") = py::none(), py::arg("payload_equals") = py::none(),
           "Top-k of each query (the item layout of the kind; codes: logp (n, d, k) tables). "
           "Filters (ANDed): labels_in / labels_not_in (int64 arrays), payload_equals "
           "{field: str | int | float | bool | None} on the top-level fields of JSON "
           "payloads. coverage in (0, 1): the conformal match set of each query (needs a "
           "calibration with conformal_fraction). max_false_match_rate in (0, 1): every item "
           "above the smallest threshold whose false-match rate is at most it with "
           "`confidence` (same calibration). Returns SearchResults.")
      .def("calibrate", &PyDB::Calibrate, py::arg("collection"), py::kw_only(),
           py::arg("vec") = py::none(), py::arg("mean") = py::none(), py::arg("var") = py::none(),
           py::arg("std") = py::none(), py::arg("log_var") = py::none(),
           py::arg("log_std") = py::none(), py::arg("weights") = py::none(),
           py::arg("logp") = py::none(), py::arg("query_labels") = py::none(),
           py::arg("score") = "", py::arg("samples") = 0, py::arg("seed") = py::none(),
           py::arg("max_pairs") = 1000000, py::arg("sample_seed") = 0, py::arg("top_ranks") = 0,
           py::arg("conformal_fraction") = 0.0, py::arg("unconditional") = false,
           py::arg("dry_run") = false, py::arg("match_parameters") = "auto",
           "Fit and store the map from a score to P(same label) (docs/calibration.md): on the "
           "collection's labelled items, or on held-out queries (the search layout) with "
           "query_labels (n,) int64. By default conditional on each result's rank, gap and "
           "eta (unconditional=True: the score alone). Returns the report as a dict: method, "
           "conditional, pairs, base_rate, before / after (held out by query: ece, ece_top1, "
           "ece_top10, brier, log_loss, precision_at_1, mean_top1_prob, eta_quartiles, "
           "worst_eta_gap), stored, and match_a / match_b (before: match_a_before, "
           "match_b_before; match_parameters_fitted). match_parameters ('auto', 'fit', "
           "'keep'): gaussian and mog collections whose match_a / match_b cannot express a "
           "match (match_b <= 0, as the defaults) get them fitted to the labelled items with "
           "'auto' (always with 'fit'); they replace the collection's, and its other maps are "
           "removed.")
      .def("import_calibration", &PyDB::ImportCalibration, py::arg("collection"), py::arg("map"),
           py::kw_only(), py::arg("base_rate") = 0.0,
           "Store a calibration map fitted elsewhere, e.g. a model file's "
           "(hedgedb.encoders.Model.calibration_map): what ingest-images does for the "
           "collection it creates from a model, so that searches report probs. base_rate in "
           "(0, 1) re-targets the map to that rate of matching pairs; 0 keeps the map's own. "
           "Replaces an earlier calibration of the map's score; the score must be one the "
           "collection's kind has.")
      .def("get", &PyDB::Get, py::arg("collection"), py::arg("ids"),
           "One dict per id: id, found, and for found items label, payload and the vectors.")
      .def("remove", &PyDB::Remove, py::arg("collection"), py::arg("ids"),
           "Remove items; an unknown id removes nothing and raises. Returns the count.")
      .def("list_ids", &PyDB::ListIds, py::arg("collection"), "The live ids, ascending.")
      .def("stats", &PyDB::Stats, py::arg("collection"), "Statistics of the collection.")
      .def("flush", &PyDB::Flush, "Bring every coarse index up to date and save it.")
      .def("catch_up", &PyDB::CatchUp,
           "read_only=True: see what the writer has acknowledged since the open or the last "
           "catch_up (in memory only). A writable database is always current.")
      .def("_native_search_seconds", &PyDB::NativeSearchSeconds, py::arg("collection"),
           py::kw_only(), py::arg("vec") = py::none(), py::arg("mean") = py::none(),
           py::arg("var") = py::none(), py::arg("k") = 10, py::arg("repeats") = 1,
           "Benchmark baseline (point and gaussian): seconds per one-query Search through the "
           "C++ API in a loop without Python.");

  m.def("fuse_gaussians", &FuseGaussiansOf, py::arg("mean"), py::arg("var") = py::none(),
        py::kw_only(), py::arg("std") = py::none(), py::arg("log_var") = py::none(),
        py::arg("log_std") = py::none(),
        "Template fusion: the n diagonal Gaussians of mean (n, D) and var (n, D) (or std, "
        "log_var, log_std) merged into one, their normalised product, as PFE fuses the images "
        "of one face: per dimension 1/var = sum 1/var_i, mean = var * sum mean_i/var_i "
        "(computed in double). Returns (mean, var), float32 arrays of shape (D,); search with "
        "mean[None], var[None]. Rows are checked as ingest checks them. Gaussians only: a "
        "product of mixtures has C^n components, and codes and points have no density to "
        "multiply (docs/python.md, Template fusion).");

  m.def("score_matrix", &ScoreMatrixOf, py::arg("kind"), py::arg("queries"), py::arg("items"),
        py::kw_only(), py::arg("score") = "", py::arg("samples") = 0, py::arg("seed") = py::int_(0),
        py::arg("match_a") = 1.0f, py::arg("match_b") = 0.0f,
        "Scores of every query against every item without a database (hedgedb/score.h "
        "ScoreMatrix): the numbers an exhaustive search of a collection with this kind, "
        "match_a/b, samples and seed returns. queries: a dict of the arrays search takes "
        "(vec; mean with var, std, log_var or log_std [and weights]; logp for codes); items: a "
        "dict of the arrays ingest takes (codes instead of logp). The sizes come from the "
        "arrays, which are checked as a collection of those sizes checks them. score: mc, csd, "
        "mls, l2, match, logprob (empty: the kind's search default); samples: Monte Carlo K "
        "per side (0: 8, mog 4C). Returns float32 (Q, N): [q, i] is item i's score for query "
        "q, higher is better.");

  m.def(
      "open",
      [](const std::string& path, bool create_if_missing, bool error_if_exists, bool sync,
         int threads, bool read_only, double index_recheck_fraction, double index_retrain_recall,
         double index_retrain_imbalance, bool index_upkeep_inline) {
        Options options;
        options.index_recheck_fraction = index_recheck_fraction;
        options.index_retrain_recall = index_retrain_recall;
        options.index_retrain_imbalance = index_retrain_imbalance;
        options.index_upkeep_inline = index_upkeep_inline;
        options.read_only = read_only;
        options.create_if_missing = create_if_missing;
        options.error_if_exists = error_if_exists;
        options.sync = sync;
        options.threads = threads;
        std::unique_ptr<DB> db;
        Status s;
        {
          py::gil_scoped_release release;
          s = DB::Open(options, path, &db);
        }
        Check(s);
        return std::make_unique<PyDB>(std::move(db), path);
      },
      py::arg("path"), py::kw_only(), py::arg("create_if_missing") = true,
      py::arg("error_if_exists") = false, py::arg("sync") = false, py::arg("threads") = 0,
      py::arg("read_only") = false,
      py::arg("index_recheck_fraction") = Options().index_recheck_fraction,
      py::arg("index_retrain_recall") = Options().index_retrain_recall,
      py::arg("index_retrain_imbalance") = Options().index_retrain_imbalance,
      py::arg("index_upkeep_inline") = false,
      "Open (or create) the database in directory `path`; use as a context manager. "
      "read_only=True: open an existing database beside the process that writes it (search, "
      "get, stats; catch_up() to see later writes); writes raise. index_recheck_fraction, "
      "index_retrain_recall, index_retrain_imbalance, index_upkeep_inline: how an IVF index is "
      "checked and retrained "
      "as items come and go (hedgedb::Options; docs/concepts.md, Coarse indexes).");
}
