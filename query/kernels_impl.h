// ISA-generic kernel bodies. Included once per ISA (kernels.cc,
// kernels_avx2.cc, kernels_avx512.cc), inside an anonymous namespace within
// that ISA's namespace, after a `struct Simd` that provides the vector type V
// with kLanes float lanes and its operations; kKernels at the end lists the
// entry points. Nothing here may have external linkage: the x86 files compile
// with their ISA's flags (common/simd_level.h). No include guard on purpose.

// Scratch that every kernel overwrites before reading: no zero fill.
inline std::unique_ptr<float[]> Scratch(size_t count) {
  return std::unique_ptr<float[]>(new float[count]);
}

// exp(x), Cephes polynomial on [-ln2/2, ln2/2] after range reduction; inputs
// are clamped so that 2^n stays a normal float.
inline Simd::V Exp(Simd::V x) {
  using V = Simd::V;
  x = Simd::Min(Simd::Max(x, Simd::Set1(-87.0f)), Simd::Set1(88.0f));
  const V n = Simd::Round(Simd::Mul(x, Simd::Set1(1.44269504088896341f)));
  // ln 2 split in two so that n * ln2_hi is exact.
  V r = Simd::Fma(n, Simd::Set1(-0.693359375f), x);
  r = Simd::Fma(n, Simd::Set1(2.12194440e-4f), r);
  V p = Simd::Set1(1.9875691500e-4f);
  p = Simd::Fma(p, r, Simd::Set1(1.3981999507e-3f));
  p = Simd::Fma(p, r, Simd::Set1(8.3334519073e-3f));
  p = Simd::Fma(p, r, Simd::Set1(4.1665795894e-2f));
  p = Simd::Fma(p, r, Simd::Set1(1.6666665459e-1f));
  p = Simd::Fma(p, r, Simd::Set1(5.0000001201e-1f));
  const V r2 = Simd::Mul(r, r);
  const V y = Simd::Add(Simd::Fma(p, r2, r), Simd::Set1(1.0f));
  return Simd::Mul(y, Simd::Pow2(n));
}

// ln(x 2^extra) for finite x > 0 and integral extra (FastLog's contract,
// kernels.h). x = m 2^e with m in [1, 2); where m >= sqrt(2) (the exponent
// of m sqrt(2) is 1) the mantissa halves and e grows by one, so
// f = m (1 - h/2) - 1 in [-0.293, 0.415] is exact. Then the Cephes logf
// polynomial: ln(1 + f) = f - f^2/2 + f^3 P(f), and (e + extra) ln 2 with ln 2
// split in two so that the large part is exact.
inline Simd::V LogScaled(Simd::V x, Simd::V extra) {
  using V = Simd::V;
  V m, e, unused, h;
  Simd::Frexp(x, &m, &e);
  Simd::Frexp(Simd::Mul(m, Simd::Set1(1.41421356f)), &unused, &h);
  const V f = Simd::Fma(Simd::Mul(h, Simd::Set1(-0.5f)), m, Simd::Sub(m, Simd::Set1(1.0f)));
  e = Simd::Add(Simd::Add(e, h), extra);
  const V z = Simd::Mul(f, f);
  V p = Simd::Set1(7.0376836292e-2f);
  p = Simd::Fma(p, f, Simd::Set1(-1.1514610310e-1f));
  p = Simd::Fma(p, f, Simd::Set1(1.1676998740e-1f));
  p = Simd::Fma(p, f, Simd::Set1(-1.2420140846e-1f));
  p = Simd::Fma(p, f, Simd::Set1(1.4249322787e-1f));
  p = Simd::Fma(p, f, Simd::Set1(-1.6668057665e-1f));
  p = Simd::Fma(p, f, Simd::Set1(2.0000714765e-1f));
  p = Simd::Fma(p, f, Simd::Set1(-2.4999993993e-1f));
  p = Simd::Fma(p, f, Simd::Set1(3.3333331174e-1f));
  V y = Simd::Mul(Simd::Mul(p, f), z);
  y = Simd::Fma(e, Simd::Set1(-2.12194440e-4f), y);
  y = Simd::Fma(z, Simd::Set1(-0.5f), y);
  y = Simd::Add(f, y);
  return Simd::Fma(e, Simd::Set1(0.693359375f), y);
}

// 1 / x for x > 0 from the ISA's estimate and one Newton step (relative error
// squares: ~2^-23 from AVX2's 12-bit estimate, float rounding after AVX-512's
// 14-bit one). Cheaper than a division, which the sigmoid needs per pair.
inline Simd::V RcpFast(Simd::V x) {
  const Simd::V r = Simd::RcpApprox(x);
  return Simd::Fma(Simd::Fma(Simd::Sub(Simd::Zero(), x), r, Simd::Set1(1.0f)), r, r);
}

// sqrt(x) for x >= 0 as x * rsqrt(x) with one Newton step (same error as
// RcpFast); x is raised to FLT_MIN first so that 0 gives ~1e-19, not NaN.
inline Simd::V SqrtFast(Simd::V x) {
  x = Simd::Max(x, Simd::Set1(1.17549435e-38f));
  const Simd::V r = Simd::RsqrtApprox(x);
  const Simd::V s = Simd::Mul(x, r);
  const Simd::V half_r = Simd::Mul(Simd::Set1(0.5f), r);
  // s * (1.5 - x r^2 / 2) = s + s * (0.5 - s * r / 2).
  return Simd::Fma(s, Simd::Fma(Simd::Sub(Simd::Zero(), s), half_r, Simd::Set1(0.5f)), s);
}

// out[i] = fn(x[i]) a vector at a time (the spare lanes of the last one
// repeat its last input): FastExp and FastLog, exposed for their tests.
template <typename Fn>
inline void MapLanes(const float* x, size_t n, float* out, Fn fn) {
  constexpr int kLanes = Simd::kLanes;
  float buffer[kLanes];
  for (size_t start = 0; start < n; start += kLanes) {
    const size_t count = std::min<size_t>(kLanes, n - start);
    for (int l = 0; l < kLanes; ++l) buffer[l] = x[start + std::min<size_t>(l, count - 1)];
    Simd::Store(buffer, fn(Simd::Load(buffer)));
    for (size_t l = 0; l < count; ++l) out[start + l] = buffer[l];
  }
}

inline void FastExpImpl(const float* x, size_t n, float* out) {
  MapLanes(x, n, out, [](Simd::V v) { return Exp(v); });
}

inline void FastLogImpl(const float* x, size_t n, float* out) {
  MapLanes(x, n, out, [](Simd::V v) { return LogScaled(v, Simd::Zero()); });
}

// One kLanes-dimension step of a MomentKernelQuery sum (kernels.h) into acc;
// mls also multiplies the mantissas of s = var_q + var into mant and adds
// their exponents to expo. The quotient is taken before the square, so
// (d / s) * d overflows only where the term itself does.
template <MomentKernelQuery::Sum kSum>
inline void MomentStep(Simd::V query_mean, Simd::V query_var, Simd::V mean, Simd::V var,
                       Simd::V* acc, Simd::V* mant, Simd::V* expo) {
  using Sum = MomentKernelQuery::Sum;
  const Simd::V delta = Simd::Sub(query_mean, mean);
  if (kSum == Sum::kSquaredDistance) {
    *acc = Simd::Fma(delta, delta, *acc);
  } else if (kSum == Sum::kCsd) {
    *acc = Simd::Fma(delta, delta, Simd::Add(*acc, var));
  } else {
    const Simd::V s = Simd::Add(query_var, var);
    *acc = Simd::Fma(Simd::Div(delta, s), delta, *acc);
    Simd::V m, e;
    Simd::Frexp(s, &m, &e);
    *mant = Simd::Mul(*mant, m);
    *expo = Simd::Add(*expo, e);
  }
}

// The sum of one row, lanes over dimensions: whole vectors, then the tail
// with the item's lanes past dim read as 0 and the query's padding (0, 1).
// The mantissa product of a lane stays below 2^64 between renormalisations.
template <MomentKernelQuery::Sum kSum>
inline float MomentSumRow(const MomentKernelQuery& q, const float* row) {
  using V = Simd::V;
  using Sum = MomentKernelQuery::Sum;
  constexpr int kLanes = Simd::kLanes;
  constexpr int kRenormaliseEvery = 64;
  const bool has_var = kSum != Sum::kSquaredDistance;
  const float* mean = row + q.mean_offset;
  const float* var = row + q.var_offset;
  V acc = Simd::Zero(), mant = Simd::Set1(1.0f), expo = Simd::Zero();
  const int full = q.dim - q.dim % kLanes;
  int steps = 0;
  for (int d = 0; d < full; d += kLanes) {
    MomentStep<kSum>(Simd::Load(q.mean + d),
                     kSum == Sum::kMls ? Simd::Load(q.var + d) : Simd::Zero(), Simd::Load(mean + d),
                     has_var ? Simd::Load(var + d) : Simd::Zero(), &acc, &mant, &expo);
    if (kSum == Sum::kMls && ++steps == kRenormaliseEvery) {
      V m, e;
      Simd::Frexp(mant, &m, &e);
      mant = m;
      expo = Simd::Add(expo, e);
      steps = 0;
    }
  }
  if (full < q.dim) {
    const int tail = q.dim - full;
    MomentStep<kSum>(
        Simd::Load(q.mean + full), kSum == Sum::kMls ? Simd::Load(q.var + full) : Simd::Zero(),
        Simd::LoadFirst(mean + full, tail),
        has_var ? Simd::LoadFirst(var + full, tail) : Simd::Zero(), &acc, &mant, &expo);
  }
  if (kSum == Sum::kMls) acc = Simd::Add(acc, LogScaled(mant, expo));
  return Simd::ReduceAdd(acc);
}

// Asks for the cache lines of floats [p, p + count) ahead of their use.
// Candidate rows lie scattered over the arena: without it each row's loads
// wait on memory one row at a time (a quarter of a two-stage mls search was
// that wait).
// Always inlined: GCC 12 takes a function whose only effect is a prefetch
// for a pure one and deletes the calls it did not inline early (query/id_map.h).
__attribute__((always_inline)) inline void PrefetchFloats(const float* p, int count) {
  for (int i = 0; i < count; i += 16) __builtin_prefetch(p + i);
}

// Rows ahead of the one scored whose lines are asked for: about a memory
// latency's worth of work on the closed-form sums at D = 64 (6 on Zen 4; 12
// on Zen 5 took an exhaustive mls query from 1.6x to 1.2-1.4x its floor and
// was no slower on scattered candidates).
constexpr size_t kPrefetchRowsAhead = 12;

template <MomentKernelQuery::Sum kSum>
inline void MomentSumRowsOf(const MomentKernelQuery& q, const void* base, size_t row_stride_bytes,
                            const int64_t* rows, size_t n, float* out) {
  const bool has_var = kSum != MomentKernelQuery::Sum::kSquaredDistance;
  for (size_t r = 0; r < n; ++r) {
    // Rows in arena order (an exhaustive scan) too: on Zen 4 the hardware
    // prefetcher alone kept up with them, on Zen 5 an exhaustive mls query
    // ran at 2.7x its memory floor without this, 1.2-1.4x with it
    // (bench/RESULTS.md, "Zen 5").
    if (r + kPrefetchRowsAhead < n) {
      const float* ahead = reinterpret_cast<const float*>(
          static_cast<const char*>(base) +
          static_cast<size_t>(rows[r + kPrefetchRowsAhead]) * row_stride_bytes);
      PrefetchFloats(ahead + q.mean_offset, q.dim);
      if (has_var) PrefetchFloats(ahead + q.var_offset, q.dim);
    }
    out[r] = MomentSumRow<kSum>(
        q, reinterpret_cast<const float*>(static_cast<const char*>(base) +
                                          static_cast<size_t>(rows[r]) * row_stride_bytes));
  }
}

// Rows in tiles of this many, scored against every query of a shared call
// while the tile is in L1 (32 gaussian rows at D = 64: 16 KB).
constexpr size_t kMomentTileRows = 32;

template <MomentKernelQuery::Sum kSum>
inline void MomentSumRowsSharedOf(const MomentKernelQuery* queries, size_t nq, const void* base,
                                  size_t row_stride_bytes, const int64_t* rows, size_t n,
                                  float* out, size_t out_stride) {
  for (size_t t0 = 0; t0 < n; t0 += kMomentTileRows) {
    const size_t m = std::min(kMomentTileRows, n - t0);
    for (size_t j = 0; j < nq; ++j) {
      MomentSumRowsOf<kSum>(queries[j], base, row_stride_bytes, rows + t0, m,
                            out + j * out_stride + t0);
    }
  }
}

// MomentSumRowsImpl for nq queries of one sum over the same rows:
// out[j * out_stride + r]; each query's numbers are its own call's, bitwise
// (a row's sum never depends on the other rows).
inline void MomentSumRowsSharedImpl(const MomentKernelQuery* queries, size_t nq, const void* base,
                                    size_t row_stride_bytes, const int64_t* rows, size_t n,
                                    float* out, size_t out_stride) {
  using Sum = MomentKernelQuery::Sum;
  if (nq == 0) return;
  switch (queries[0].sum) {
    case Sum::kCsd:
      MomentSumRowsSharedOf<Sum::kCsd>(queries, nq, base, row_stride_bytes, rows, n, out,
                                       out_stride);
      break;
    case Sum::kMls:
      MomentSumRowsSharedOf<Sum::kMls>(queries, nq, base, row_stride_bytes, rows, n, out,
                                       out_stride);
      break;
    case Sum::kSquaredDistance:
      MomentSumRowsSharedOf<Sum::kSquaredDistance>(queries, nq, base, row_stride_bytes, rows, n,
                                                   out, out_stride);
      break;
  }
}

inline void MomentSumRowsImpl(const MomentKernelQuery& q, const void* base, size_t row_stride_bytes,
                              const int64_t* rows, size_t n, float* out) {
  using Sum = MomentKernelQuery::Sum;
  switch (q.sum) {
    case Sum::kCsd:
      MomentSumRowsOf<Sum::kCsd>(q, base, row_stride_bytes, rows, n, out);
      break;
    case Sum::kMls:
      MomentSumRowsOf<Sum::kMls>(q, base, row_stride_bytes, rows, n, out);
      break;
    case Sum::kSquaredDistance:
      MomentSumRowsOf<Sum::kSquaredDistance>(q, base, row_stride_bytes, rows, n, out);
      break;
  }
}

// Weighted sum over kQuery query samples x kItem item samples of
// sigmoid(-a * ||x_i - y_t|| + b), lanes = candidates. Both sides are centred
// on the query's sample mean, so ||x - y||^2 = ||x||^2 + ||y||^2 - 2 x.y does
// not cancel large norms. The item samples y_t = mu + sd * eps_t (mu centred,
// d-major lane vectors) are formed in registers a dimension at a time, never
// stored, and the Gram x.y is one FMA per pair and dimension into kQuery *
// kItem register accumulators. x: query samples, i-major (x[i * dim + d]).
// Only the first `items` item samples count (the rest is padding).
template <int kQuery, int kItem>
inline Simd::V McPairBlock(const float* x, const float* x_norm, const float* x_weight,
                           const float* const* eps, const float* mu_t, const float* sd_t, int items,
                           int dim, Simd::V pos_a, Simd::V neg_b) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  // Fully unrolled so that the arrays live in registers, not on the stack.
  V gram[kQuery][kItem];
  V y_norm[kItem];
#pragma GCC unroll 16
  for (int t = 0; t < kItem; ++t) {
    y_norm[t] = Simd::Zero();
#pragma GCC unroll 16
    for (int i = 0; i < kQuery; ++i) gram[i][t] = Simd::Zero();
  }
  for (int d = 0; d < dim; ++d) {
    const V sd = Simd::Load(sd_t + d * kLanes);
    const V mu = Simd::Load(mu_t + d * kLanes);
    V yd[kItem];
#pragma GCC unroll 16
    for (int t = 0; t < kItem; ++t) {
      yd[t] = Simd::Fma(sd, Simd::Set1(eps[t][d]), mu);
      y_norm[t] = Simd::Fma(yd[t], yd[t], y_norm[t]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < kQuery; ++i) {
      const V xd = Simd::Set1(x[i * dim + d]);
#pragma GCC unroll 16
      for (int t = 0; t < kItem; ++t) gram[i][t] = Simd::Fma(xd, yd[t], gram[i][t]);
    }
  }
  const V one = Simd::Set1(1.0f);
  const V minus_two = Simd::Set1(-2.0f);
  V sum = Simd::Zero();
#pragma GCC unroll 16
  for (int i = 0; i < kQuery; ++i) {
    const V xn = Simd::Set1(x_norm[i]);
    V pair_sum = Simd::Zero();
#pragma GCC unroll 16
    for (int t = 0; t < kItem; ++t) {
      if (t >= items) break;
      const V d2 = Simd::Fma(minus_two, gram[i][t], Simd::Add(xn, y_norm[t]));
      const V dist = SqrtFast(d2);
      // sigmoid(-a*dist + b) = 1 / (1 + exp(a*dist - b)).
      const V e = Exp(Simd::Fma(pos_a, dist, neg_b));
      pair_sum = Simd::Add(pair_sum, RcpFast(Simd::Add(one, e)));
    }
    sum = Simd::Fma(Simd::Set1(x_weight[i]), pair_sum, sum);
  }
  return sum;
}

// A query's side of McPairBlock: its samples centred on their mean, with
// norms and weights, padded to a multiple of kMcQueryBlock with weight 0.
constexpr int kMcQueryBlock = 8;
struct McQueryState {
  int padded = 0;
  std::unique_ptr<float[]> centre, x, x_norm, x_weight;
};

inline McQueryState PrepareMcQuery(const McKernelQuery& q) {
  const int dim = q.dim;
  McQueryState s;
  s.padded = (q.samples + kMcQueryBlock - 1) / kMcQueryBlock * kMcQueryBlock;
  s.centre = Scratch(dim);
  for (int d = 0; d < dim; ++d) {
    double total = 0.0;
    for (int i = 0; i < q.samples; ++i) total += q.query_samples[static_cast<size_t>(i) * dim + d];
    s.centre[d] = static_cast<float>(total / q.samples);
  }
  s.x = Scratch(static_cast<size_t>(s.padded) * dim);
  s.x_norm = Scratch(s.padded);
  s.x_weight = Scratch(s.padded);
  for (int i = 0; i < s.padded; ++i) {
    const int src = std::min(i, q.samples - 1);
    float norm = 0.0f;
    for (int d = 0; d < dim; ++d) {
      const float v = q.query_samples[static_cast<size_t>(src) * dim + d] - s.centre[d];
      s.x[static_cast<size_t>(i) * dim + d] = v;
      norm += v * v;
    }
    s.x_norm[i] = norm;
    s.x_weight[i] = i < q.samples ? q.query_weights[i] : 0.0f;
  }
  return s;
}

// Monte Carlo scores of nq queries against the same rows, kLanes rows at a
// time (see McKernelQuery; the queries share everything but their samples
// and weights): out[j * out_stride + r] for query j. Per block of rows and
// component, the means and sds are transposed once (the transposition was 40%
// of an exhaustive one-query scan, and a batch paid it per query); then per
// query the means are centred on its sample mean and McPairBlock runs over
// blocks of item samples, so each item sample is formed once per query when
// K <= kMcQueryBlock. Every query's numbers are those of a call with it
// alone, bitwise: the same operations in the same order.
inline void McScoreRowsSharedImpl(const McKernelQuery* queries, size_t nq, const void* base,
                                  size_t row_stride_bytes, const int64_t* rows, size_t n,
                                  float* out, size_t out_stride) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  // 8 x 2 accumulators + 2 item vectors and their norms fit 32 zmm; 8 x 1 fit
  // AVX2's 16 ymm.
  constexpr int kItemBlock = kLanes >= 16 ? 2 : 1;
  if (n == 0 || nq == 0) return;
  const McKernelQuery& q = queries[0];
  const int dim = q.dim;
  const int components = q.components;
  const int per_component = q.samples / components;

  std::vector<McQueryState> states;
  states.reserve(nq);
  for (size_t j = 0; j < nq; ++j) states.push_back(PrepareMcQuery(queries[j]));

  const size_t sample_floats = static_cast<size_t>(dim) * kLanes;
  const std::unique_ptr<float[]> scratch = Scratch(sample_floats * 3);
  float* mu_raw = scratch.get();
  float* sd_t = mu_raw + sample_floats;
  float* mu_t = sd_t + sample_floats;
  // Per query, the lanes of its running total over the components.
  const std::unique_ptr<float[]> totals = Scratch(nq * kLanes);
  const float* row_ptr[kLanes];
  alignas(64) float lane_buffer[kLanes];
  const V pos_a = Simd::Set1(q.match_a);
  const V neg_b = Simd::Set1(-q.match_b);

  for (size_t start = 0; start < n; start += kLanes) {
    const size_t count = std::min<size_t>(kLanes, n - start);
    // Spare lanes repeat the last row; their results are dropped.
    for (int l = 0; l < kLanes; ++l) {
      const int64_t row = rows[start + std::min<size_t>(l, count - 1)];
      row_ptr[l] = reinterpret_cast<const float*>(static_cast<const char*>(base) +
                                                  static_cast<size_t>(row) * row_stride_bytes);
    }
    // The next block's rows are fetched while this one is scored.
    for (size_t r = start + kLanes; r < std::min(n, start + 2 * kLanes); ++r) {
      const float* ahead = reinterpret_cast<const float*>(
          static_cast<const char*>(base) + static_cast<size_t>(rows[r]) * row_stride_bytes);
      if (q.weight_offset >= 0) __builtin_prefetch(ahead + q.weight_offset);
      PrefetchFloats(ahead + q.mean_offset, components * dim);
      PrefetchFloats(ahead + q.var_offset, components * dim);
    }
    for (size_t j = 0; j < nq; ++j) Simd::Store(totals.get() + j * kLanes, Simd::Zero());
    for (int c = 0; c < components; ++c) {
      Simd::TransposeRows(row_ptr, q.mean_offset + c * dim, dim, mu_raw);
      Simd::TransposeRows(row_ptr, q.var_offset + c * dim, dim, sd_t);
      for (int d = 0; d < dim; ++d) {
        Simd::Store(sd_t + d * kLanes, SqrtFast(Simd::Load(sd_t + d * kLanes)));
      }
      // Item sample weight pi'_c / (K/C).
      for (int l = 0; l < kLanes; ++l) {
        lane_buffer[l] = q.weight_offset < 0 ? 1.0f : row_ptr[l][q.weight_offset + c];
        lane_buffer[l] /= static_cast<float>(per_component);
      }
      const V weight = Simd::Load(lane_buffer);
      for (size_t j = 0; j < nq; ++j) {
        const McQueryState& st = states[j];
        for (int d = 0; d < dim; ++d) {
          Simd::Store(mu_t + d * kLanes,
                      Simd::Sub(Simd::Load(mu_raw + d * kLanes), Simd::Set1(st.centre[d])));
        }
        V component_sum = Simd::Zero();
        for (int t0 = 0; t0 < per_component; t0 += kItemBlock) {
          const int items = std::min(kItemBlock, per_component - t0);
          // Padding samples repeat the last one so the Gram reads defined numbers.
          const float* eps[kItemBlock];
          for (int t = 0; t < kItemBlock; ++t) {
            eps[t] = q.item_eps +
                     static_cast<size_t>(c * per_component + t0 + std::min(t, items - 1)) * dim;
          }
          for (int i0 = 0; i0 < st.padded; i0 += kMcQueryBlock) {
            component_sum =
                Simd::Add(component_sum,
                          McPairBlock<kMcQueryBlock, kItemBlock>(
                              st.x.get() + static_cast<size_t>(i0) * dim, st.x_norm.get() + i0,
                              st.x_weight.get() + i0, eps, mu_t, sd_t, items, dim, pos_a, neg_b));
          }
        }
        float* total = totals.get() + j * kLanes;
        Simd::Store(total, Simd::Fma(weight, component_sum, Simd::Load(total)));
      }
    }
    for (size_t j = 0; j < nq; ++j) {
      const float* total = totals.get() + j * kLanes;
      for (size_t l = 0; l < count; ++l) out[j * out_stride + start + l] = total[l];
    }
  }
}

inline void McScoreRowsImpl(const McKernelQuery& q, const void* base, size_t row_stride_bytes,
                            const int64_t* rows, size_t n, float* out) {
  McScoreRowsSharedImpl(&q, 1, base, row_stride_bytes, rows, n, out, n);
}

// Masked sum over kBlock vectors of sample pairs (lanes = pairs) of
// sigmoid(-a * sqrt(var . delta_sq_p) + b) for one row's variances.
template <int kBlock>
inline Simd::V EtaPairVectors(const float* var, const float* delta_sq, const float* pair_mask,
                              int pair_stride, int dim, Simd::V pos_a, Simd::V neg_b) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  V acc[kBlock];
  for (int t = 0; t < kBlock; ++t) acc[t] = Simd::Zero();
  for (int d = 0; d < dim; ++d) {
    const V v = Simd::Set1(var[d]);
    const float* e = delta_sq + static_cast<size_t>(d) * pair_stride;
    for (int t = 0; t < kBlock; ++t) acc[t] = Simd::Fma(v, Simd::Load(e + t * kLanes), acc[t]);
  }
  const V one = Simd::Set1(1.0f);
  V sum = Simd::Zero();
  for (int t = 0; t < kBlock; ++t) {
    const V e = Exp(Simd::Fma(pos_a, Simd::Sqrt(acc[t]), neg_b));
    sum = Simd::Fma(Simd::Load(pair_mask + t * kLanes), Simd::Div(one, Simd::Add(one, e)), sum);
  }
  return sum;
}

inline Simd::V EtaPairVectorsAny(int block, const float* var, const float* delta_sq,
                                 const float* pair_mask, int pair_stride, int dim, Simd::V pos_a,
                                 Simd::V neg_b) {
  switch (block) {
#define HEDGEDB_ETA_BLOCK_CASE(B) \
  case B:                         \
    return EtaPairVectors<B>(var, delta_sq, pair_mask, pair_stride, dim, pos_a, neg_b);
    HEDGEDB_ETA_BLOCK_CASE(1)
    HEDGEDB_ETA_BLOCK_CASE(2)
    HEDGEDB_ETA_BLOCK_CASE(3)
    HEDGEDB_ETA_BLOCK_CASE(4)
    HEDGEDB_ETA_BLOCK_CASE(5)
    HEDGEDB_ETA_BLOCK_CASE(6)
    HEDGEDB_ETA_BLOCK_CASE(7)
    HEDGEDB_ETA_BLOCK_CASE(8)
#undef HEDGEDB_ETA_BLOCK_CASE
    default:
      return Simd::Zero();
  }
}

inline void GaussianEtaRowsImpl(const GaussianEtaKernelQuery& q, const void* base,
                                size_t row_stride_bytes, const int64_t* rows, size_t n,
                                float* out) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  constexpr int kMaxBlock = 8;
  const int vectors = q.pair_stride / kLanes;
  const V pos_a = Simd::Set1(q.match_a);
  const V neg_b = Simd::Set1(-q.match_b);
  const float pairs = static_cast<float>(q.samples) * static_cast<float>(q.samples);
  float lane_buffer[kLanes];
  for (size_t r = 0; r < n; ++r) {
    const float* var =
        reinterpret_cast<const float*>(static_cast<const char*>(base) +
                                       static_cast<size_t>(rows[r]) * row_stride_bytes) +
        q.var_offset;
    V sum = Simd::Zero();
    for (int v0 = 0; v0 < vectors; v0 += kMaxBlock) {
      sum =
          Simd::Add(sum, EtaPairVectorsAny(std::min(kMaxBlock, vectors - v0), var,
                                           q.pair_delta_sq + v0 * kLanes, q.pair_mask + v0 * kLanes,
                                           q.pair_stride, q.dim, pos_a, neg_b));
    }
    Simd::Store(lane_buffer, sum);
    float match = 0.0f;
    for (int l = 0; l < kLanes; ++l) match += lane_buffer[l];
    out[r] = std::min(1.0f, std::max(0.0f, 1.0f - match / pairs));
  }
}

// sum_t w_t * sigmoid(-a ||x - y_t|| + b) over kBlock samples y_t, lanes =
// rows; x and y_t are d-major lane vectors (x[d * kLanes]).
template <int kBlock>
inline Simd::V SelfPairBlock(const float* x, const float* y, int dim, const float* y_weights,
                             Simd::V pos_a, Simd::V neg_b) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  const size_t sample_stride = static_cast<size_t>(dim) * kLanes;
  V acc[kBlock];
  for (int t = 0; t < kBlock; ++t) acc[t] = Simd::Zero();
  for (int d = 0; d < dim; ++d) {
    const V xd = Simd::Load(x + d * kLanes);
    for (int t = 0; t < kBlock; ++t) {
      const V diff = Simd::Sub(xd, Simd::Load(y + t * sample_stride + d * kLanes));
      acc[t] = Simd::Fma(diff, diff, acc[t]);
    }
  }
  const V one = Simd::Set1(1.0f);
  V sum = Simd::Zero();
  for (int t = 0; t < kBlock; ++t) {
    const V e = Exp(Simd::Fma(pos_a, Simd::Sqrt(acc[t]), neg_b));
    sum = Simd::Fma(Simd::Load(y_weights + t * kLanes), Simd::Div(one, Simd::Add(one, e)), sum);
  }
  return sum;
}

inline Simd::V SelfPairBlockAny(int block, const float* x, const float* y, int dim,
                                const float* y_weights, Simd::V pos_a, Simd::V neg_b) {
  switch (block) {
#define HEDGEDB_SELF_BLOCK_CASE(B) \
  case B:                          \
    return SelfPairBlock<B>(x, y, dim, y_weights, pos_a, neg_b);
    HEDGEDB_SELF_BLOCK_CASE(1)
    HEDGEDB_SELF_BLOCK_CASE(2)
    HEDGEDB_SELF_BLOCK_CASE(3)
    HEDGEDB_SELF_BLOCK_CASE(4)
    HEDGEDB_SELF_BLOCK_CASE(5)
    HEDGEDB_SELF_BLOCK_CASE(6)
    HEDGEDB_SELF_BLOCK_CASE(7)
    HEDGEDB_SELF_BLOCK_CASE(8)
#undef HEDGEDB_SELF_BLOCK_CASE
    default:
      return Simd::Zero();
  }
}

inline void MixtureEtaRowsImpl(const MixtureEtaKernelQuery& q, const void* base,
                               size_t row_stride_bytes, const int64_t* rows, size_t n, float* out) {
  using V = Simd::V;
  constexpr int kLanes = Simd::kLanes;
  constexpr int kMaxBlock = 8;
  if (n == 0) return;
  const int dim = q.dim;
  const int samples = q.samples;
  const int per_component = samples / q.components;
  const size_t sample_floats = static_cast<size_t>(dim) * kLanes;
  // Both sample sets of kLanes rows, d-major, plus per-sample lane weights.
  const std::unique_ptr<float[]> first = Scratch(samples * sample_floats);
  const std::unique_ptr<float[]> second = Scratch(samples * sample_floats);
  const std::unique_ptr<float[]> weights = Scratch(static_cast<size_t>(samples) * kLanes);
  const std::unique_ptr<float[]> mean_t = Scratch(sample_floats);
  const std::unique_ptr<float[]> sd_t = Scratch(sample_floats);
  const float* row_ptr[kLanes];
  float lane_buffer[kLanes];
  const V pos_a = Simd::Set1(q.match_a);
  const V neg_b = Simd::Set1(-q.match_b);
  for (size_t start = 0; start < n; start += kLanes) {
    const size_t count = std::min<size_t>(kLanes, n - start);
    // Spare lanes repeat the last row; their results are dropped.
    for (int l = 0; l < kLanes; ++l) {
      const int64_t row = rows[start + std::min<size_t>(l, count - 1)];
      row_ptr[l] = reinterpret_cast<const float*>(static_cast<const char*>(base) +
                                                  static_cast<size_t>(row) * row_stride_bytes);
    }
    for (int c = 0; c < q.components; ++c) {
      Simd::TransposeRows(row_ptr, q.mean_offset + c * dim, dim, mean_t.get());
      Simd::TransposeRows(row_ptr, q.var_offset + c * dim, dim, sd_t.get());
      for (int d = 0; d < dim; ++d) {
        Simd::Store(sd_t.get() + d * kLanes, Simd::Sqrt(Simd::Load(sd_t.get() + d * kLanes)));
      }
      for (int l = 0; l < kLanes; ++l) {
        lane_buffer[l] = row_ptr[l][q.weight_offset + c] / static_cast<float>(per_component);
      }
      for (int s = c * per_component; s < (c + 1) * per_component; ++s) {
        Simd::Store(weights.get() + static_cast<size_t>(s) * kLanes, Simd::Load(lane_buffer));
        for (int d = 0; d < dim; ++d) {
          const V mean = Simd::Load(mean_t.get() + d * kLanes);
          const V sd = Simd::Load(sd_t.get() + d * kLanes);
          const size_t at = s * sample_floats + static_cast<size_t>(d) * kLanes;
          Simd::Store(
              first.get() + at,
              Simd::Fma(sd, Simd::Set1(q.first_eps[static_cast<size_t>(s) * dim + d]), mean));
          Simd::Store(
              second.get() + at,
              Simd::Fma(sd, Simd::Set1(q.second_eps[static_cast<size_t>(s) * dim + d]), mean));
        }
      }
    }
    V match = Simd::Zero();
    for (int i = 0; i < samples; ++i) {
      V row_sum = Simd::Zero();
      for (int j0 = 0; j0 < samples; j0 += kMaxBlock) {
        row_sum = Simd::Add(
            row_sum,
            SelfPairBlockAny(std::min(kMaxBlock, samples - j0), first.get() + i * sample_floats,
                             second.get() + j0 * sample_floats, dim,
                             weights.get() + static_cast<size_t>(j0) * kLanes, pos_a, neg_b));
      }
      match =
          Simd::Fma(Simd::Load(weights.get() + static_cast<size_t>(i) * kLanes), row_sum, match);
    }
    const V eta = Simd::Sub(Simd::Set1(1.0f), match);
    Simd::Store(lane_buffer, Simd::Min(Simd::Max(eta, Simd::Zero()), Simd::Set1(1.0f)));
    for (size_t l = 0; l < count; ++l) out[start + l] = lane_buffer[l];
  }
}

constexpr KernelTable kKernels = {
    &McScoreRowsImpl,   &McScoreRowsSharedImpl,   &GaussianEtaRowsImpl, &MixtureEtaRowsImpl,
    &MomentSumRowsImpl, &MomentSumRowsSharedImpl, &FastExpImpl,         &FastLogImpl};
