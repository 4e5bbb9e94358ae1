// L2SqrRows, ISA-generic: plain C++ whose loops the compiler vectorises for
// the flags of the file that includes it (list_scan.cc, list_scan_avx2.cc,
// list_scan_avx512.cc), inside that level's namespace. `omp simd reduction`
// lets it sum a row's dimensions in vector lanes (another order than the
// sequential reference: the results differ by float rounding). Four rows at
// a time, so the query's values are loaded once for four rows and four sums
// are in flight (list_scan_avx512.cc has its own, with intrinsics, and
// defines HEDGEDB_LIST_SCAN_OWN_ROWS). No include guard on purpose.
//
// L2SqrColumns: the same distances to n vectors stored transposed (row t of
// `columns`, `stride` floats apart, holds dimension t of every vector): a
// vector instruction scores 16 of them at once and needs no horizontal sum.
// The quantizer step of the list scan reads its centroids this way, for nq
// queries at a time (out: nq rows of n).
//
// L2SqrFp16Rows: L2SqrRows over rows of IEEE half floats (FAISS's QT_fp16
// codes), each widened to float before its difference.
#ifndef HEDGEDB_LIST_SCAN_OWN_SQ8  // list_scan_avx512.cc writes its own
// L2SqrSq8Rows: sum_t (a_t - b_t c_t)^2 over rows of d uint8 codes, the
// codes widened to float in vector lanes; four rows at a time as L2SqrRows.
void L2SqrSq8Rows(const float* a, const float* b, const uint8_t* codes, int64_t n, int d,
                  float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint8_t* r0 = codes + i * d;
    const uint8_t* r1 = r0 + d;
    const uint8_t* r2 = r1 + d;
    const uint8_t* r3 = r2 + d;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int t = 0; t < d; ++t) {
      const float e0 = a[t] - b[t] * float(r0[t]), e1 = a[t] - b[t] * float(r1[t]);
      const float e2 = a[t] - b[t] * float(r2[t]), e3 = a[t] - b[t] * float(r3[t]);
      s0 += e0 * e0;
      s1 += e1 * e1;
      s2 += e2 * e2;
      s3 += e3 * e3;
    }
    out[i] = s0;
    out[i + 1] = s1;
    out[i + 2] = s2;
    out[i + 3] = s3;
  }
  for (; i < n; ++i) {
    const uint8_t* r = codes + i * d;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int t = 0; t < d; ++t) {
      const float e = a[t] - b[t] * float(r[t]);
      s += e * e;
    }
    out[i] = s;
  }
}
#endif

#ifndef HEDGEDB_LIST_SCAN_OWN_FP16  // list_scan_avx2.cc and list_scan_avx512.cc write their own
// L2SqrFp16Rows: sum_t (q_t - x_t)^2 over rows of d halves, each widened to
// a float by common/half.h's branch-free HalfToFloat (only the portable
// level compiles this one: its inline function must not be built with a
// per-ISA file's flags); four rows at a time as L2SqrRows.
void L2SqrFp16Rows(const float* q, const uint16_t* codes, int64_t n, int d, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint16_t* r0 = codes + i * d;
    const uint16_t* r1 = r0 + d;
    const uint16_t* r2 = r1 + d;
    const uint16_t* r3 = r2 + d;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int t = 0; t < d; ++t) {
      const float e0 = q[t] - ::hedgedb::HalfToFloat(r0[t]), e1 = q[t] - ::hedgedb::HalfToFloat(r1[t]);
      const float e2 = q[t] - ::hedgedb::HalfToFloat(r2[t]), e3 = q[t] - ::hedgedb::HalfToFloat(r3[t]);
      s0 += e0 * e0;
      s1 += e1 * e1;
      s2 += e2 * e2;
      s3 += e3 * e3;
    }
    out[i] = s0;
    out[i + 1] = s1;
    out[i + 2] = s2;
    out[i + 3] = s3;
  }
  for (; i < n; ++i) {
    const uint16_t* r = codes + i * d;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int t = 0; t < d; ++t) {
      const float e = q[t] - ::hedgedb::HalfToFloat(r[t]);
      s += e * e;
    }
    out[i] = s;
  }
}
#endif

#ifndef HEDGEDB_LIST_SCAN_OWN_COLUMNS  // list_scan_avx512.cc writes its own
void L2SqrColumns(const float* q, int nq, const float* columns, int64_t stride, int64_t n, int d,
                  float* out) {
  for (int k = 0; k < nq; ++k) {
    const float* qk = q + int64_t(k) * d;
    float* ok = out + int64_t(k) * n;
    for (int64_t j = 0; j < n; ++j) ok[j] = 0.0f;
    for (int t = 0; t < d; ++t) {
      const float qt = qk[t];
      const float* c = columns + t * stride;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const float a = qt - c[j];
        ok[j] += a * a;
      }
    }
  }
}
#endif

#ifndef HEDGEDB_LIST_SCAN_OWN_ROWS  // list_scan_avx512.cc writes its own
void L2SqrRows(const float* q, const float* rows, int64_t n, int d, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float* r0 = rows + i * d;
    const float* r1 = r0 + d;
    const float* r2 = r1 + d;
    const float* r3 = r2 + d;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int t = 0; t < d; ++t) {
      const float a = q[t] - r0[t], b = q[t] - r1[t], c = q[t] - r2[t], e = q[t] - r3[t];
      s0 += a * a;
      s1 += b * b;
      s2 += c * c;
      s3 += e * e;
    }
    out[i] = s0;
    out[i + 1] = s1;
    out[i + 2] = s2;
    out[i + 3] = s3;
  }
  for (; i < n; ++i) {
    const float* r = rows + i * d;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int t = 0; t < d; ++t) {
      const float a = q[t] - r[t];
      s += a * a;
    }
    out[i] = s;
  }
}
#endif
