// Small FAISS helpers shared by the two coarse index implementations.
// Internal to index/.
#pragma once

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>

#include <exception>
#include <string>
#include <typeinfo>

#include "hedgedb/status.h"

namespace hedgedb {
namespace index {

// FAISS reports bad parameters and failures as exceptions.
inline Status FromFaiss(const std::exception& e, const std::string& what) {
  return Status::InvalidArgument(what + ": " + e.what());
}

// The index below the id map and any pre-transform.
inline faiss::Index* Innermost(faiss::Index* index) {
  if (auto* idmap = dynamic_cast<faiss::IndexIDMap*>(index)) index = idmap->index;
  if (auto* pre = dynamic_cast<faiss::IndexPreTransform*>(index)) index = pre->index;
  return index;
}

// The class chain of an index (and its list count), to check that a loaded
// file holds the structure the collection's factory string builds.
inline std::string StructureOf(faiss::Index* index) {
  std::string out;
  while (index) {
    // read_index returns IndexFlatL2 / IndexFlatIP for a saved IndexFlat:
    // the same structure, named by its metric.
    if (auto* flat = dynamic_cast<faiss::IndexFlat*>(index)) {
      out += "Flat/" + std::to_string(int(flat->metric_type));
    } else {
      out += typeid(*index).name();
    }
    faiss::Index* next = nullptr;
    if (auto* idmap = dynamic_cast<faiss::IndexIDMap*>(index)) next = idmap->index;
    if (auto* pre = dynamic_cast<faiss::IndexPreTransform*>(index)) next = pre->index;
    if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(index)) {
      out += "/" + std::to_string(ivf->nlist);
    }
    if (next) out += ">";
    index = next;
  }
  return out;
}

}  // namespace index
}  // namespace hedgedb
