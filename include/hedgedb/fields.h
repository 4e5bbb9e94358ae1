// The fields of the public structs that front ends print (a collection's
// spec and stats, the calibration report), by name and in one order. The
// CLI's JSON and the Python module's dicts are written from here, so a field
// added to a struct is added once and reaches every front end alike; before,
// each wrote its own list and they drifted (Python's stats lacked the index
// tuning, the recall estimate and the notes).
//
// VisitFields(s, visit) calls visit(name, value) for each field of s, where
// value is a double, float, int64_t, uint64_t, bool, const std::string&,
// Kind, ScoreType, const CalibrationQuality&, const
// std::vector<EtaGroupQuality>& or const std::vector<CalibrationInfo>&: a
// visitor is a struct with an operator() for each (it recurses into nested
// structs by calling VisitFields again). What a front end leaves out (the
// CLI: empty text; SpecFieldApplies) is its own display choice; the names
// and values are these. Header only; no exported symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/calibration.h"
#include "hedgedb/types.h"

namespace hedgedb {

// Every field of a spec (a front end may show only those that apply to the
// kind: SpecFieldApplies).
template <typename Visitor>
void VisitFields(const CollectionSpec& spec, Visitor&& visit) {
  visit("name", spec.name);
  visit("kind", spec.kind);
  visit("dim", int64_t(spec.dim));
  visit("components", int64_t(spec.components));
  visit("code_k", int64_t(spec.code_k));
  visit("index_factory", spec.index_factory);
  visit("match_a", float(spec.match_a));
  visit("match_b", float(spec.match_b));
  visit("samples", int64_t(spec.samples));
  visit("seed", uint64_t(spec.seed));
  visit("row_format", std::string(RowFormatName(spec.row_format)));
  visit("metadata", spec.metadata);
}

// Whether a spec field means something for the kind: components (mog),
// code_k (codes), match_a and match_b (not codes), samples (gaussian, mog),
// row_format (not codes).
// The others always do.
inline bool SpecFieldApplies(Kind kind, const std::string& field) {
  if (field == "components") return kind == Kind::kMog;
  if (field == "code_k") return kind == Kind::kCodes;
  if (field == "match_a" || field == "match_b") return kind != Kind::kCodes;
  if (field == "samples") return kind == Kind::kGaussian || kind == Kind::kMog;
  if (field == "row_format") return kind != Kind::kCodes;
  return true;
}

// One quartile of the queries by eta (not its reliability bins).
template <typename Visitor>
void VisitFields(const EtaGroupQuality& g, Visitor&& visit) {
  visit("eta_lo", g.eta_lo);
  visit("eta_hi", g.eta_hi);
  visit("queries", int64_t(g.queries));
  visit("mean_top1_prob", g.mean_top1_prob);
  visit("precision_at_1", g.precision_at_1);
  visit("gap", g.gap);
}

// How well probabilities hold (not the reliability bins, which the pictures
// draw).
template <typename Visitor>
void VisitFields(const CalibrationQuality& q, Visitor&& visit) {
  visit("ece", q.ece);
  visit("ece_top1", q.ece_top1);
  visit("ece_top10", q.ece_top10);
  visit("brier", q.brier);
  visit("log_loss", q.log_loss);
  visit("precision_at_1", q.precision_at_1);
  visit("mean_top1_prob", q.mean_top1_prob);
  visit("erc_area_eta", q.erc_area_eta);
  visit("erc_area_prob", q.erc_area_prob);
  visit("erc_area_oracle", q.erc_area_oracle);
  visit("eta_quartiles", q.eta_quartiles);
  visit("worst_eta_gap", q.worst_eta_gap);
}

// A stored map, as CollectionStats lists it.
template <typename Visitor>
void VisitFields(const CalibrationInfo& info, Visitor&& visit) {
  visit("score", info.score);
  visit("method", info.method);
  visit("conditional", bool(info.conditional));
  visit("conditioned_on", info.conditioned_on);
  visit("reason", info.reason);
  visit("pairs", int64_t(info.pairs));
  visit("fit_base_rate", double(info.fit_base_rate));
  visit("base_rate", double(info.base_rate));
  visit("samples", int64_t(info.samples));
  visit("sequence", int64_t(info.sequence));
  visit("conformal_queries", int64_t(info.conformal_queries));
  visit("held_out_non_matches", int64_t(info.held_out_non_matches));
}

// What DB::Calibrate reports: the map's fields, then the fit's (not the
// per-query top matches, which the pictures draw).
template <typename Visitor>
void VisitFields(const CalibrationReport& report, Visitor&& visit) {
  VisitFields(report.info, visit);
  visit("queries", int64_t(report.queries));
  visit("positives", int64_t(report.positives));
  visit("before", report.before);
  visit("after", report.after);
  visit("stored", bool(report.stored));
  visit("match_parameters_fitted", bool(report.match_parameters_fitted));
  visit("match_a_before", double(report.match_a_before));
  visit("match_b_before", double(report.match_b_before));
  visit("match_a", double(report.match_a));
  visit("match_b", double(report.match_b));
  visit("match_parameters_note", report.match_parameters_note);
}

// A collection's stats: its spec's fields, then the state of its items,
// index, arena and calibrations (flat, as `hedgedb stats` prints them).
template <typename Visitor>
void VisitFields(const CollectionStats& stats, Visitor&& visit) {
  VisitFields(stats.spec, visit);
  visit("items", int64_t(stats.items));
  visit("max_id", int64_t(stats.max_id));
  visit("sequence", uint64_t(stats.sequence));
  visit("index_sequence", uint64_t(stats.index_sequence));
  visit("index_vectors", int64_t(stats.index_vectors));
  visit("index_trained", bool(stats.index_trained));
  visit("index_stale", bool(stats.index_stale));
  visit("index_nprobe", int64_t(stats.index_nprobe));
  visit("index_ef_search", int64_t(stats.index_ef_search));
  visit("index_candidates", int64_t(stats.index_candidates));
  visit("index_recall_estimate", double(stats.index_recall_estimate));
  visit("index_coarse_recall", double(stats.index_coarse_recall));
  visit("index_fit_seconds", double(stats.index_fit_seconds));
  visit("index_note", stats.index_note);
  visit("index_changes_since_check", int64_t(stats.index_changes_since_check));
  visit("index_checked_sequence", uint64_t(stats.index_checked_sequence));
  visit("index_checked_time", int64_t(stats.index_checked_time));
  visit("index_retrained_sequence", uint64_t(stats.index_retrained_sequence));
  visit("index_retrained_time", int64_t(stats.index_retrained_time));
  visit("index_retrains", int64_t(stats.index_retrains));
  visit("index_retraining", bool(stats.index_retraining));
  visit("index_upkeep_note", stats.index_upkeep_note);
  visit("index_retrain_reason", stats.index_retrain_reason);
  visit("index_imbalance", double(stats.index_imbalance));
  visit("index_imbalance_baseline", double(stats.index_imbalance_baseline));
  visit("lost_writes", stats.lost_writes);
  visit("index_description", stats.index_description);
  visit("arena_source", stats.arena_source);
  visit("arena_mapped_bytes", int64_t(stats.arena_mapped_bytes));
  visit("arena_note", stats.arena_note);
  visit("calibrations", stats.calibrations);
  visit("calibration_note", stats.calibration_note);
}

}  // namespace hedgedb
