// The fields of the calibration structs, by name and in one order. Front ends
// write their reports from here (the CLI's JSON, the Python module's dicts),
// so a field added to a struct is added once and reaches every front end
// alike; before, each wrote its own list and they drifted.
//
// VisitFields(s, visit) calls visit(name, value) for each field of s, where
// value is a double, int64_t, bool, const std::string&, ScoreType, const
// CalibrationQuality& or const std::vector<EtaGroupQuality>&: a visitor is a
// struct with an operator() for each (it recurses into nested structs by
// calling VisitFields again). Header only; no exported symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/calibration.h"
#include "hedgedb/types.h"

namespace hedgedb {

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
}

}  // namespace hedgedb
