// The fields of a model spec (model_file.h), by name and in one order: the
// model file's header (SpecToJson) and the Python module's Model.spec dict
// are both written from here, so a field added to ModelSpec is added once;
// before, each wrote its own list and Python's lacked most of them. The
// style of include/hedgedb/fields.h: VisitFields(s, visit) calls
// visit(name, value) for each field, where value is an int64_t, uint64_t,
// double, bool, const std::string&, const std::vector<int64_t>&, const
// std::vector<double>&, Method, Kind, BackboneType, or a group of fields
// (const BackboneFields&, const DataSettings&) that the visitor writes by
// calling VisitFields again. Header only, torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "encoders/data/data_settings.h"
#include "encoders/models/model_file.h"

namespace hedgedb::encoders {

// The backbone's fields, a group of their own ("backbone" in the header).
struct BackboneFields {
  const ModelSpec& spec;
};

template <typename Visitor>
void VisitFields(const BackboneFields& b, Visitor&& visit) {
  visit("type", b.spec.backbone);
  visit("path", b.spec.backbone_path);
  visit("conv1_channels", int64_t(b.spec.cnn.conv1_channels));
  visit("conv2_channels", int64_t(b.spec.cnn.conv2_channels));
  visit("cnn_hidden", int64_t(b.spec.cnn.hidden));
  visit("mlp_hidden", int64_t(b.spec.mlp_hidden));
}

// The recorded training data (only when data.recorded: ModelSpec's visit
// leaves the group out otherwise, as files written before it lack it).
template <typename Visitor>
void VisitFields(const DataSettings& d, Visitor&& visit) {
  visit("source", d.source);
  visit("seed", uint64_t(d.seed));
  visit("items", int64_t(d.items));
  // Written only when set: older files have none and read as "reference".
  if (!d.composite_layout.empty()) visit("composite_layout", d.composite_layout);
  visit("train_total", int64_t(d.train_total));
  visit("test_total", int64_t(d.test_total));
  visit("image_size", int64_t(d.image_size));
  visit("bbox", bool(d.bbox));
  visit("class_split", int64_t(d.class_split));
  visit("image_fit", d.image_fit);
}

// Every field of a spec. SpecFromJson reads the same names back.
template <typename Visitor>
void VisitFields(const ModelSpec& s, Visitor&& visit) {
  visit("method", s.method);
  visit("kind", s.kind);
  visit("dim", int64_t(s.dim));
  visit("components", int64_t(s.components));
  visit("code_dims", int64_t(s.code_dims));
  visit("code_k", int64_t(s.code_k));
  visit("dimco_hidden", int64_t(s.dimco_hidden));
  visit("match_a", double(s.match_a));
  visit("match_b", double(s.match_b));
  visit("sigma_eps2", double(s.sigma_eps2));
  visit("min_variance", double(s.min_variance));
  visit("input_shape", s.input_shape);
  visit("input_mean", s.input_mean);
  visit("input_std", s.input_std);
  visit("backbone", BackboneFields{s});
  visit("feature_dim", int64_t(s.feature_dim));
  if (s.data.recorded) visit("data", s.data);
}

}  // namespace hedgedb::encoders
