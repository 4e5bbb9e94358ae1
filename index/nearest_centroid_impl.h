// NearestCentroids' row minimum, ISA-generic: plain C++ whose loops the
// compiler vectorises for the flags of the file that includes it
// (nearest_centroid.cc, nearest_centroid_avx2.cc, nearest_centroid_avx512.cc),
// inside that level's namespace, defining its RowMinimum
// (nearest_centroid_isa.h). Every version computes the same values
// bit for bit: elementwise norms - 2 ip (times 2 is exact, so a fused
// multiply-add rounds as the separate operations do, short of overflow), an
// exact minimum and the first position holding it. No include guard on
// purpose.
//
// Over one row's products with centroids [j0, j0 + m): turns ip[j] into
// |c_j|^2 - 2 x.c_j (the squared distance less |x|^2) and, if its minimum is
// below *best, stores it there and its first position in *best_j.
void RowMinimum(float* ip, const float* norms, int64_t m, int64_t j0, float* best,
                int64_t* best_j) {
  float low = std::numeric_limits<float>::infinity();
#pragma omp simd reduction(min : low)
  for (int64_t j = 0; j < m; ++j) {
    const float v = norms[j] - 2.0f * ip[j];
    ip[j] = v;
    low = v < low ? v : low;
  }
  if (!(low < *best)) return;  // ties keep the earlier centroid
  // The first position holding the minimum: a vector test per 16 values.
  for (int64_t c = 0; c < m; c += 16) {
    const int64_t end = std::min(m, c + 16);
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int64_t j = c; j < end; ++j) hit |= ip[j] == low;
    if (!hit) continue;
    for (int64_t j = c; j < end; ++j) {
      if (ip[j] == low) {
        *best = low;
        *best_j = j0 + j;
        return;
      }
    }
  }
}
