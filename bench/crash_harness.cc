// Crash harness: kills a writing process with SIGKILL at random moments inside
// its write path and checks, after each kill, that the database lost nothing
// it acknowledged and holds nothing in part.
//
//   crash_harness --cycles 1000 --dir /tmp/crashdb [--seed 1]
//
// Each cycle the parent writes a script of operations (ingest with automatic
// ids and a batch token, ingest with explicit ids, remove, drop, create,
// close + reopen, calibrate) that are valid from the state it knows, starts
// itself as a child that runs the script against the database and reports on
// a pipe before each operation ("begin") and after it returned ("done"), waits
// until the child has opened the database, and kills it 10-200 ms later. It
// then opens the database itself and checks it against its model:
//   * every acknowledged operation is there; the one in flight is there
//     entirely or not at all (each batch's items all present or all absent,
//     likewise removes; a drop leaves the collection whole or gone; a create
//     leaves it absent or empty; an absent one is created then);
//   * a batch with a token that was in flight, ingested again, is replayed
//     exactly when it had been committed, with the same ids;
//   * every item holds the data written, counts, largest ids and sequence
//     numbers match, and the index is consistent: loaded or rebuilt without
//     error, not stale, covering the records, and each live item's own
//     embedding finds itself first;
//   * the calibration is the old map or the new one, and searches with it
//     give probabilities in [0, 1];
//   * a backup that finished holds the state the model had when it was
//     taken (checked as the database is); a repair of the undamaged store
//     keeps everything, and one cut short is finished by repairing again.
// The child checks its IVF index after every 2% of its items changed and
// retrains it at every check, in the background
// (Options::index_retrain_recall = 1), so kills also land inside a retrain:
// its training, its catch-up, its save of the new index file. The child
// reports each step of a retrain on the pipe; the summary counts the kills
// that came during one, and the checks above hold for them as for the rest
// (the index reopens as the old file caught up, or the new one, or rebuilt).
// Any violation is printed with the cycle and operation; the exit code is 1.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hedgedb/db.h"
#include "query/collection.h"
#include "tests/engine/batches.h"
#include "tests/engine/child_process.h"

namespace hedgedb {
namespace {

using testing::Batch;
using testing::MakeSpec;
using testing::RandomBatch;

// Two small collections: a Gaussian one on a flat index and a point one on an
// IVF index that gets trained (156 items) and saved as items come and go.
constexpr int kCollections = 2;
CollectionSpec SpecOf(int c) {
  return c == 0 ? MakeSpec("g", Kind::kGaussian, 8, "Flat")
                : MakeSpec("p", Kind::kPoint, 12, "IVF4,Flat");
}
constexpr int kIvfLists = 4;
constexpr size_t kMaxItems = 400;  // removes and drops keep collections small
constexpr int kScriptOps = 5000;   // more than a child gets through in 200 ms
constexpr int64_t kCalibratePairs = 1000;

enum OpKind {
  kIngestAuto,
  kIngestIds,
  kRemove,
  kDrop,
  kCreate,
  kClose,
  kCalibrate,
  kBackup,
  kRepair,
  kOpKinds
};
const char* const kOpNames[kOpKinds] = {"ingest (auto ids, token)",
                                        "ingest (explicit ids)",
                                        "remove",
                                        "drop",
                                        "create",
                                        "close + reopen",
                                        "calibrate",
                                        "backup",
                                        "close + repair + reopen"};

// Where the backup of operation `op` of a cycle goes (removed after the
// cycle's checks).
std::string BackupPath(const std::string& db_path, size_t op) {
  return db_path + ".backup-" + std::to_string(op);
}

struct Op {
  int kind = kClose;
  int coll = 0;
  int64_t first_id = 0;      // kIngestIds
  int64_t n = 0;             // ingests
  uint64_t seed = 0;         // ingests, calibrate
  std::string token;         // kIngestAuto
  std::vector<int64_t> ids;  // kRemove
};

// What the child tells the parent.
struct Msg {
  int32_t what;   // kStarted, kBegin, kDone, kRetrainStep
  int32_t op;     // kRetrainStep: an index of kRetrainSteps
  int64_t value;  // done: first id of an ingest; 1 if a calibration was stored
};
enum { kStarted, kBegin, kDone, kRetrainStep };
// The steps of a background retrain (query::Collection::SetUpkeepHookForTest);
// a kill after one of the first four and before the next "adopted" or
// "abandoned" came during the retrain.
const char* const kRetrainSteps[] = {"retraining", "trained", "caught-up",
                                     "saving",     "adopted", "abandoned"};
constexpr int kRetrainStepCount = 6;
constexpr int kSavingStep = 3;
constexpr int kFirstEndStep = 4;

std::string EncodeScript(const std::vector<Op>& ops) {
  std::ostringstream out;
  for (const Op& op : ops) {
    out << op.kind << ' ' << op.coll << ' ' << op.first_id << ' ' << op.n << ' ' << op.seed << ' '
        << (op.token.empty() ? "-" : op.token) << ' ' << op.ids.size();
    for (int64_t id : op.ids) out << ' ' << id;
    out << '\n';
  }
  return out.str();
}

std::vector<Op> DecodeScript(const std::string& text) {
  std::vector<Op> ops;
  std::istringstream in(text);
  Op op;
  size_t nids;
  while (in >> op.kind >> op.coll >> op.first_id >> op.n >> op.seed >> op.token >> nids) {
    if (op.token == "-") op.token.clear();
    op.ids.resize(nids);
    for (auto& id : op.ids) in >> id;
    ops.push_back(op);
  }
  return ops;
}

// The batch an ingest writes: explicit ids first_id.., or none (automatic).
Batch BatchOf(const Op& op) {
  Batch b = RandomBatch(SpecOf(op.coll), op.n, op.kind == kIngestIds ? op.first_id : 0, op.seed);
  if (op.kind == kIngestAuto) b.ids.clear();
  return b;
}

// ---- The child: runs the script, reporting before and after each operation.

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "crash_harness child: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::_Exit(3);
}

void Send(int fd, int32_t what, int32_t op, int64_t value) {
  Msg m{what, op, value};
  if (::write(fd, &m, sizeof(m)) != sizeof(m)) std::_Exit(4);
}

int RunChild(const std::string& db_path, const std::string& script_path, int fd) {
  std::ifstream in(script_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<Op> ops = DecodeScript(text.str());
  Options options;
  options.threads = 1;
  // Retrains in the kill mix: a check after every 2% of the items changed
  // each one retraining in the background.
  options.index_recheck_fraction = 0.02;
  options.index_retrain_recall = 1;
  // Pipe writes this small are atomic: the upkeep thread's reports and the
  // script's do not interleave within a message.
  query::Collection::SetUpkeepHookForTest([fd](const char* step) {
    for (int i = 0; i < kRetrainStepCount; ++i) {
      if (std::strcmp(step, kRetrainSteps[i]) == 0) Send(fd, kRetrainStep, i, 0);
    }
  });
  std::unique_ptr<DB> db;
  Status s = DB::Open(options, db_path, &db);
  if (!s.ok()) Fail("open", s);
  Send(fd, kStarted, -1, 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const std::string name = SpecOf(op.coll).name;
    int64_t value = 0;
    Send(fd, kBegin, int32_t(i), 0);
    switch (op.kind) {
      case kIngestAuto:
      case kIngestIds: {
        Batch b = BatchOf(op);
        IngestBatch ib = b.ingest();
        ib.token = op.token;
        std::vector<int64_t> ids;
        s = db->Ingest(name, ib, &ids);
        if (!s.ok()) Fail("ingest", s);
        value = ids.front();
        break;
      }
      case kRemove:
        s = db->Remove(name, op.ids.data(), op.ids.size(), nullptr);
        if (!s.ok()) Fail("remove", s);
        break;
      case kDrop:
        s = db->DropCollection(name);
        if (!s.ok()) Fail("drop", s);
        break;
      case kCreate:
        s = db->CreateCollection(SpecOf(op.coll));
        if (!s.ok()) Fail("create", s);
        break;
      case kClose:
        db.reset();  // saves the index files
        s = DB::Open(options, db_path, &db);
        if (!s.ok()) Fail("reopen", s);
        break;
      case kCalibrate: {
        CalibrateOptions co;
        co.max_pairs = kCalibratePairs;
        co.sample_seed = op.seed;
        // A refused fit (too few pairs) stores nothing; the parent checks that.
        value = db->Calibrate(name, co, nullptr).ok() ? 1 : 0;
        break;
      }
      case kBackup:
        s = db->Backup(BackupPath(db_path, i), nullptr);
        if (!s.ok()) Fail("backup", s);
        break;
      case kRepair: {
        // A repair of an undamaged store must keep everything.
        db.reset();
        RepairReport report;
        s = RepairDB(db_path, &report);
        if (!s.ok()) Fail("repair", s);
        if (!report.complete()) Fail("repair", Status::Corruption("it reports lost data"));
        s = DB::Open(options, db_path, &db);
        if (!s.ok()) Fail("reopen after repair", s);
        break;
      }
    }
    Send(fd, kDone, int32_t(i), value);
  }
  return 0;
}

// ---- The parent: the model of what the database must hold.

struct Item {
  std::vector<float> a, b;  // point: vec; gaussian: mean, var
  int64_t label = 0;
};

struct CollModel {
  bool exists = false;
  std::map<int64_t, Item> items;
  int64_t max_id = -1;
  uint64_t sequence = 0;
  int64_t calib_sequence = -1;  // sequence the stored map was fitted at; -1: none
};

using Model = std::vector<CollModel>;

// The items an ingest adds, given the id of its first item.
std::map<int64_t, Item> ItemsOf(const Op& op, int64_t first_id) {
  Batch b = BatchOf(op);
  const int D = SpecOf(op.coll).dim;
  std::map<int64_t, Item> items;
  for (int64_t i = 0; i < op.n; ++i) {
    Item it;
    const std::vector<float>& a = b.vec.empty() ? b.mean : b.vec;
    it.a.assign(a.begin() + i * D, a.begin() + (i + 1) * D);
    if (!b.var.empty()) it.b.assign(b.var.begin() + i * D, b.var.begin() + (i + 1) * D);
    it.label = b.labels[i];
    items[first_id + i] = it;
  }
  return items;
}

// The first id an ingest gets in state m.
int64_t FirstIdOf(const Op& op, const CollModel& m) {
  return op.kind == kIngestIds ? op.first_id : m.max_id + 1;
}

// The state after `op`; `calibrated`: a calibrate stored its map.
void Apply(const Op& op, bool calibrated, Model* model) {
  CollModel& m = (*model)[op.coll];
  switch (op.kind) {
    case kIngestAuto:
    case kIngestIds:
      for (auto& kv : ItemsOf(op, FirstIdOf(op, m))) {
        m.items[kv.first] = kv.second;
        m.max_id = std::max(m.max_id, kv.first);
      }
      m.sequence += 1;
      break;
    case kRemove:
      for (int64_t id : op.ids) m.items.erase(id);
      m.sequence += 1;
      break;
    case kDrop:
      m = CollModel();
      break;
    case kCreate:
      m = CollModel();
      m.exists = true;
      break;
    case kClose:
    case kBackup:
    case kRepair:
      break;
    case kCalibrate:
      if (calibrated) m.calib_sequence = int64_t(m.sequence);
      break;
  }
}

// A script valid from `model`, assuming every operation succeeds.
std::vector<Op> MakeScript(Model model, std::mt19937_64* rng, int64_t* token_counter) {
  std::vector<Op> ops;
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo + int64_t((*rng)() % uint64_t(hi - lo + 1));
  };
  while (ops.size() < size_t(kScriptOps)) {
    Op op;
    op.coll = int(uniform(0, kCollections - 1));
    const CollModel& m = model[op.coll];
    const int64_t r = uniform(0, 99);
    op.seed = (*rng)();
    if (!m.exists) {
      op.kind = kCreate;
    } else if (m.items.size() > kMaxItems) {
      op.kind = r < 10 ? kDrop : kRemove;
    } else if (r < 40) {
      op.kind = kIngestAuto;
    } else if (r < 65) {
      op.kind = kIngestIds;
    } else if (r < 85) {
      op.kind = kRemove;
    } else if (r < 89) {
      op.kind = kDrop;
    } else if (r < 92) {
      op.kind = kClose;  // slow (reopen): rarer, or it would be in flight at most kills
    } else if (r < 94) {
      op.kind = kBackup;
    } else if (r < 95) {
      op.kind = kRepair;  // slow (repair, reopen)
    } else {
      op.kind = kCalibrate;
    }
    if (op.kind == kRemove && m.items.empty()) op.kind = kIngestAuto;
    switch (op.kind) {
      case kIngestAuto:
        op.n = uniform(1, 40);
        op.token = "t" + std::to_string((*token_counter)++);
        break;
      case kIngestIds:
        op.n = uniform(1, 40);
        op.first_id = m.max_id + 1 + uniform(0, 5);
        break;
      case kRemove: {
        std::vector<int64_t> live;
        for (auto& kv : m.items) live.push_back(kv.first);
        std::shuffle(live.begin(), live.end(), *rng);
        live.resize(size_t(std::min<int64_t>(int64_t(live.size()), uniform(1, 30))));
        op.ids = live;
        break;
      }
      default:
        break;
    }
    Apply(op, false, &model);
    ops.push_back(op);
  }
  return ops;
}

// ---- Checking the reopened database.

struct Checker {
  int cycle = 0;
  std::string in_flight;
  int violations = 0;
  std::set<int> written;  // collections the check itself wrote to
  void Violation(const std::string& what) {
    ++violations;
    std::fprintf(stderr, "VIOLATION cycle %d (in flight: %s): %s\n", cycle, in_flight.c_str(),
                 what.c_str());
  }
  bool Ok(const Status& s, const std::string& what) {
    if (!s.ok()) Violation(what + ": " + s.ToString());
    return s.ok();
  }
};

// How many of `ids` the collection holds (-1: it cannot be read).
int64_t CountPresent(DB* db, const std::string& name, const std::vector<int64_t>& ids,
                     Checker* ck) {
  std::vector<Record> recs;
  if (!ck->Ok(db->Get(name, ids.data(), ids.size(), &recs), "get " + name)) return -1;
  int64_t n = 0;
  for (const Record& r : recs) n += r.found;
  return n;
}

bool Exists(DB* db, const std::string& name) {
  std::vector<std::string> names;
  db->ListCollections(&names);
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Decides whether the operation in flight took effect (violations if it did
// in part) and brings the model to the database's state.
void ResolveInFlight(DB* db, const Op& op, Model* model, Checker* ck) {
  CollModel& m = (*model)[op.coll];
  const std::string name = SpecOf(op.coll).name;
  switch (op.kind) {
    case kIngestAuto:
    case kIngestIds: {
      const int64_t first = FirstIdOf(op, m);
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < op.n; ++i) ids.push_back(first + i);
      const int64_t present = CountPresent(db, name, ids, ck);
      if (present != 0 && present != op.n) {
        ck->Violation("partial batch: " + std::to_string(present) + " of " + std::to_string(op.n) +
                      " items from id " + std::to_string(first));
        return;
      }
      if (op.kind == kIngestAuto) {
        // The retry after an unknown outcome: replayed exactly if committed.
        Batch b = BatchOf(op);
        IngestBatch ib = b.ingest();
        ib.token = op.token;
        std::vector<int64_t> got;
        IngestResult res;
        ck->written.insert(op.coll);
        if (!ck->Ok(db->Ingest(name, ib, &got, &res), "retry with token " + op.token)) return;
        if (res.replayed != (present == op.n)) {
          ck->Violation("retry with token " + op.token +
                        ": replayed=" + std::to_string(res.replayed) + " but the batch was " +
                        (present ? "present" : "absent"));
        }
        if (got != ids) ck->Violation("retry with token " + op.token + " returned other ids");
        Apply(op, false, model);
      } else if (present == op.n) {
        Apply(op, false, model);
      }
      break;
    }
    case kRemove: {
      const int64_t present = CountPresent(db, name, op.ids, ck);
      if (present == 0) {
        Apply(op, false, model);
      } else if (present != int64_t(op.ids.size())) {
        ck->Violation("partial remove: " + std::to_string(present) + " of " +
                      std::to_string(op.ids.size()) + " ids still present");
      }
      break;
    }
    case kDrop:
      if (!Exists(db, name)) Apply(op, false, model);
      break;
    case kCreate:
      // Creating takes longer than most kill delays: do it here when it did
      // not happen, or the next cycles would mostly kill creates again.
      if (Exists(db, name) || ck->Ok(db->CreateCollection(SpecOf(op.coll)), "create " + name)) {
        Apply(op, false, model);
      }
      break;
    case kClose:
    case kBackup:  // a partial copy is removed; the database is checked as always
    case kRepair:  // the parent repaired again before opening (RunParent)
      break;
    case kCalibrate: {
      CollectionStats st;
      if (!ck->Ok(db->GetStats(name, &st), "stats " + name)) return;
      // The new map, if stored, was fitted at the current sequence.
      if (!st.calibrations.empty() && int64_t(st.calibrations[0].sequence) == int64_t(m.sequence)) {
        Apply(op, true, model);
      }
      break;
    }
  }
}

// Why an item did not find itself: with every item a candidate, and scored
// exhaustively.
std::string Diagnose(DB* db, const std::string& name, const Batch& queries, size_t i,
                     SearchOptions so) {
  Batch one = queries;
  const size_t D =
      one.vec.empty() ? one.mean.size() / size_t(one.n) : one.vec.size() / size_t(one.n);
  one.n = 1;
  std::vector<float>& a = one.vec.empty() ? one.mean : one.vec;
  a.assign(a.begin() + i * D, a.begin() + (i + 1) * D);
  if (!one.var.empty()) one.var.assign(one.var.begin() + i * D, one.var.begin() + (i + 1) * D);
  std::string out;
  for (int mode = 0; mode < 2; ++mode) {
    SearchOptions o = so;
    if (mode == 0) o.candidates = 100000;
    if (mode == 1) o.exhaustive = true;
    std::vector<SearchResult> r;
    Status s = db->Search(name, one.view(), o, &r);
    out += std::string(mode == 0 ? "; all candidates: " : "; exhaustive: ") +
           (!s.ok()             ? s.ToString()
            : r[0].hits.empty() ? "nothing"
                                : std::to_string(r[0].hits[0].id));
  }
  return out;
}

void CheckCollection(DB* db, int c, const CollModel& m, Checker* ck) {
  const CollectionSpec spec = SpecOf(c);
  const std::string& name = spec.name;
  CollectionStats st;
  if (!ck->Ok(db->GetStats(name, &st), "stats " + name)) return;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) ck->Violation(name + ": " + what);
  };
  expect(st.items == int64_t(m.items.size()),
         "items " + std::to_string(st.items) + ", expected " + std::to_string(m.items.size()));
  expect(st.max_id == m.max_id,
         "max_id " + std::to_string(st.max_id) + ", expected " + std::to_string(m.max_id));
  expect(st.sequence == m.sequence,
         "sequence " + std::to_string(st.sequence) + ", expected " + std::to_string(m.sequence));
  expect(!st.index_stale, "index stale: " + st.index_note);
  // Opening saves an index file that is behind; the check's own writes are
  // saved on close.
  expect(ck->written.count(c) || st.index_sequence == st.sequence,
         "index covers sequence " + std::to_string(st.index_sequence) + " of " +
             std::to_string(st.sequence));
  // An index not yet trained holds nothing (searches are exhaustive).
  expect(!st.index_trained || st.index_vectors >= st.items,
         "index holds " + std::to_string(st.index_vectors) + " vectors for " +
             std::to_string(st.items) + " items");
  // Calibration: the model's map or none.
  if (m.calib_sequence < 0) {
    expect(st.calibrations.empty(), "a calibration nobody stored");
  } else if (st.calibrations.size() != 1) {
    expect(false, "calibrations: " + std::to_string(st.calibrations.size()) + ", expected 1");
  } else {
    const CalibrationInfo& ci = st.calibrations[0];
    expect(int64_t(ci.sequence) == m.calib_sequence && ci.pairs > 0 && !ci.method.empty(),
           "calibration fitted at sequence " + std::to_string(ci.sequence) + " (" + ci.method +
               "), expected " + std::to_string(m.calib_sequence));
  }
  if (m.items.empty()) return;

  // Every item, with its data.
  std::vector<int64_t> ids;
  for (auto& kv : m.items) ids.push_back(kv.first);
  std::vector<Record> recs;
  if (!ck->Ok(db->Get(name, ids.data(), ids.size(), &recs), "get " + name)) return;
  Batch queries;
  queries.n = int64_t(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Item& it = m.items.at(ids[i]);
    const Record& r = recs[i];
    const std::vector<float>& a = spec.kind == Kind::kPoint ? r.vec : r.mean;
    if (!r.found || a != it.a || r.var != it.b || !r.has_label || r.label != it.label) {
      expect(false, "item " + std::to_string(ids[i]) + (r.found ? " holds other data" : " lost"));
      return;
    }
    (spec.kind == Kind::kPoint ? queries.vec : queries.mean)
        .insert((spec.kind == Kind::kPoint ? queries.vec : queries.mean).end(), it.a.begin(),
                it.a.end());
    queries.var.insert(queries.var.end(), it.b.begin(), it.b.end());
  }
  // The index finds every live item from its own embedding.
  SearchOptions so;
  so.k = 1;
  so.score = ScoreType::kL2;
  so.with_uncertainty = false;
  // Every indexed vector a candidate: an item missing from the index is not
  // found (the coarse distance of a Gaussian includes its spread, so the
  // default candidate count need not reach the item itself).
  so.candidates = int64_t(ids.size());
  if (spec.index_factory.rfind("IVF", 0) == 0) so.nprobe = kIvfLists;
  std::vector<SearchResult> results;
  if (!ck->Ok(db->Search(name, queries.view(), so, &results), "search " + name)) return;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (results[i].hits.empty() || results[i].hits[0].id != ids[i]) {
      expect(false,
             "item " + std::to_string(ids[i]) + " does not find itself first (found " +
                 (results[i].hits.empty() ? std::string("nothing")
                                          : std::to_string(results[i].hits[0].id) + " score " +
                                                std::to_string(results[i].hits[0].score)) +
                 ")" + Diagnose(db, name, queries, i, so));
      return;
    }
  }
  if (m.calib_sequence >= 0) {
    SearchOptions cs;
    cs.k = 3;
    cs.with_uncertainty = false;
    if (so.nprobe) cs.nprobe = so.nprobe;
    Batch one = queries;
    one.n = 1;
    if (!ck->Ok(db->Search(name, one.view(), cs, &results), "calibrated search " + name)) return;
    for (const SearchHit& h : results[0].hits) {
      expect(h.prob >= 0 && h.prob <= 1, "calibrated probability " + std::to_string(h.prob));
    }
  }
}

void CheckAll(DB* db, const Model& model, Checker* ck) {
  std::vector<std::string> names;
  if (!ck->Ok(db->ListCollections(&names), "list")) return;
  std::set<std::string> have(names.begin(), names.end()), want;
  for (int c = 0; c < kCollections; ++c) {
    if (model[c].exists) want.insert(SpecOf(c).name);
  }
  if (have != want) {
    std::string got;
    for (auto& n : have) got += n + " ";
    ck->Violation("collections present: " + got);
  }
  for (int c = 0; c < kCollections; ++c) {
    if (model[c].exists && have.count(SpecOf(c).name)) CheckCollection(db, c, model[c], ck);
  }
}

int RunParent(const std::string& dir, int cycles, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string db_path = dir + "/db", script_path = dir + "/script.txt";
  std::mt19937_64 rng(seed);
  int64_t token_counter = 0;
  Model model(kCollections);
  Options options;
  options.threads = 1;
  Checker ck;
  std::vector<int64_t> in_flight_counts(kOpKinds + 1, 0);  // last: between operations
  int64_t acknowledged = 0, finished = 0;
  int64_t kills_in_retrain = 0, kills_in_retrain_save = 0;
  std::vector<int64_t> retrain_steps(kRetrainStepCount, 0);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    ck.cycle = cycle;
    const std::vector<Op> ops = MakeScript(model, &rng, &token_counter);
    {
      std::ofstream out(script_path, std::ios::trunc);
      out << EncodeScript(ops);
    }
    int fds[2];
    if (::pipe(fds) != 0) return 2;
    const pid_t pid =
        testing::SpawnSelf({"--child", db_path, script_path, std::to_string(fds[1])}, {}, fds[0]);
    if (pid < 0) {
      std::perror("spawn");
      return 2;
    }
    ::close(fds[1]);
    // Read until the child has started writing, then for a random 10-200 ms.
    int last_begin = -1, last_done = -1;
    int retrain_step = -1;  // the last step of a retrain reported
    bool started = false, eof = false;
    std::vector<int64_t> done_value(ops.size(), 0);
    auto read_one = [&](int timeout_ms) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return;
      Msg msg;
      if (::read(fds[0], &msg, sizeof(msg)) != sizeof(msg)) {
        eof = true;
        return;
      }
      if (msg.what == kStarted) started = true;
      if (msg.what == kRetrainStep) {
        retrain_step = msg.op;
        ++retrain_steps[size_t(msg.op)];
      }
      if (msg.what == kBegin) last_begin = msg.op;
      if (msg.what == kDone) {
        last_done = msg.op;
        done_value[size_t(msg.op)] = msg.value;
      }
    };
    while (!started && !eof) read_one(-1);
    const auto kill_at =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(10 + int64_t(rng() % 191));
    while (!eof) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            kill_at - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) break;
      read_one(int(left));
    }
    int status = eof ? 0 : testing::KillAndReap(pid);
    if (eof) ::waitpid(pid, &status, 0);
    // Reports written before the kill are still in the pipe.
    while (!eof) read_one(-1);  // the writer is gone: ends at EOF
    ::close(fds[0]);
    if (!WIFSIGNALED(status)) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        ++finished;  // ran the whole script before the kill: nothing in flight
      } else {
        ck.Violation("the child failed (status " + std::to_string(status) + ")");
      }
    }
    // The model after every acknowledged operation; then the one in flight.
    // A finished backup must hold the model as it was then.
    std::vector<std::pair<std::string, Model>> backups;
    for (int i = 0; i <= last_done; ++i) {
      if (ops[size_t(i)].kind == kBackup)
        backups.emplace_back(BackupPath(db_path, size_t(i)), model);
      const Op& op = ops[size_t(i)];
      if ((op.kind == kIngestAuto || op.kind == kIngestIds) &&
          done_value[size_t(i)] != FirstIdOf(op, model[op.coll])) {
        ck.Violation("op " + std::to_string(i) + " got first id " +
                     std::to_string(done_value[size_t(i)]) + ", expected " +
                     std::to_string(FirstIdOf(op, model[op.coll])));
      }
      Apply(op, done_value[size_t(i)] == 1, &model);
      ++acknowledged;
    }
    const bool has_in_flight = started && last_begin > last_done;
    if (started && WIFSIGNALED(status) && retrain_step >= 0 && retrain_step < kFirstEndStep) {
      ++kills_in_retrain;
      if (retrain_step == kSavingStep) ++kills_in_retrain_save;
    }
    if (started && WIFSIGNALED(status)) {
      ++in_flight_counts[has_in_flight ? ops[size_t(last_begin)].kind : kOpKinds];
    }
    ck.written.clear();
    ck.in_flight = has_in_flight ? kOpNames[ops[size_t(last_begin)].kind] : "nothing";
    if (has_in_flight && ops[size_t(last_begin)].kind == kRepair) {
      // A repair cut short may leave the store without its MANIFEST or
      // CURRENT: repairing again must finish it and lose nothing.
      RepairReport report;
      if (ck.Ok(RepairDB(db_path, &report), "repair after a repair was killed") &&
          !report.complete()) {
        ck.Violation("repair after a repair was killed reports lost data");
      }
    }
    std::unique_ptr<DB> db;
    if (!ck.Ok(DB::Open(options, db_path, &db), "reopen")) break;
    if (has_in_flight) ResolveInFlight(db.get(), ops[size_t(last_begin)], &model, &ck);
    CheckAll(db.get(), model, &ck);
    db.reset();
    for (const auto& backup : backups) {
      std::unique_ptr<DB> copy;
      ck.in_flight = "checking the finished backup " + backup.first;
      if (!ck.Ok(DB::Open(options, backup.first, &copy), "open the backup")) continue;
      const std::set<int> written = ck.written;
      ck.written.clear();  // the check's own writes went to the database, not the copy
      CheckAll(copy.get(), backup.second, &ck);
      ck.written = written;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      std::error_code ec;
      if (ops[i].kind == kBackup) std::filesystem::remove_all(BackupPath(db_path, i), ec);
    }
    if (ck.violations > 0) break;  // the model no longer describes the database
    if ((cycle + 1) % 100 == 0) {
      std::printf("cycle %d: %lld operations acknowledged, violations %d\n", cycle + 1,
                  (long long)acknowledged, ck.violations);
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "cycles: %d  violations: %d  acknowledged operations: %lld  children that finished "
      "their script before the kill: %lld  wall time: %.0f s\n",
      ck.cycle + 1, ck.violations, (long long)acknowledged, (long long)finished, secs);
  std::printf(
      "background retrains: %lld started, %lld adopted, %lld abandoned; kills during one: %lld "
      "(%lld while it saved the new index file)\n",
      (long long)retrain_steps[0], (long long)retrain_steps[size_t(kFirstEndStep)],
      (long long)retrain_steps[size_t(kFirstEndStep + 1)], (long long)kills_in_retrain,
      (long long)kills_in_retrain_save);
  std::printf("in flight at the kill:\n");
  for (int k = 0; k <= kOpKinds; ++k) {
    std::printf("  %-26s %lld\n", k < kOpKinds ? kOpNames[k] : "between operations",
                (long long)in_flight_counts[size_t(k)]);
  }
  return ck.violations == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hedgedb

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--child") {
    return hedgedb::RunChild(argv[2], argv[3], std::atoi(argv[4]));
  }
  int cycles = 1000;
  uint64_t seed = 1;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--cycles") {
      cycles = std::atoi(value.c_str());
    } else if (flag == "--seed") {
      seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--dir") {
      dir = value;
    } else {
      dir.clear();
      break;
    }
  }
  if (dir.empty() || cycles <= 0 || argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: crash_harness --dir DIR [--cycles N (1000)] [--seed S (1)]\n"
                 "DIR is emptied first.\n");
    return 2;
  }
  return hedgedb::RunParent(dir, cycles, seed);
}
