// Embedding kinds, score types and the plain structs that describe
// collections, batches, records and search results: one header that
// includes them all, by topic:
//   kinds.h             Kind, ScoreType and their names, ResolveScore
//   collection_spec.h   CollectionSpec, DefaultSamples
//   batches.h           VarianceForm and ToVariance, EmbeddingView,
//                       IngestBatch, IngestResult, Record
//   search_options.h    SearchFilter, SearchOptions, SearchHit, SearchResult
//   collection_stats.h  CalibrationInfo, CollectionStats
#pragma once

#include "hedgedb/batches.h"
#include "hedgedb/collection_spec.h"
#include "hedgedb/collection_stats.h"
#include "hedgedb/kinds.h"
#include "hedgedb/search_options.h"
