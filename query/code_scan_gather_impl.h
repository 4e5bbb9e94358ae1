// Lanes-are-items gather scan, ISA-generic: defines ScanGatherItems
// (kernels_isa.h). Included once per ISA (code_scan_avx2.cc,
// code_scan_avx512.cc) in that ISA's namespace, after a `struct Gather` (in an
// anonymous namespace) with kLanes item lanes and the vector operations used
// below. No include guard on purpose.
//
// Per lane, one 32-bit gather fetches the code bytes of four dimensions (the
// last four bytes of the row for the tail, so no read passes the row end);
// per dimension the byte becomes an index into the table row and one gather
// fetches the entries. Each lane sums its item in dimension order from 0, as
// ScalarCodeScore does. Needs d >= 4.
void ScanGatherItems(const float* table, int d, int k, const uint8_t* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, float* out) {
  constexpr size_t kItemBlock = kCodeScanItemBlock;
  constexpr int kDimChunk = kCodeScanDimChunk;
  alignas(64) float partial[kItemBlock];
  alignas(64) int64_t offsets[kItemBlock];
  for (size_t start = 0; start < n; start += kItemBlock) {
    const size_t count = std::min(kItemBlock, n - start);
    // Byte offsets of the rows from base, padded to whole vectors by
    // repeating the first row (those sums are computed and dropped).
    const size_t padded = (count + Gather::kLanes - 1) / Gather::kLanes * Gather::kLanes;
    for (size_t r = 0; r < padded; ++r) {
      offsets[r] = static_cast<int64_t>(rows[start + (r < count ? r : 0)]) *
                   static_cast<int64_t>(row_stride_bytes);
      partial[r] = 0.0f;
    }
    for (int i0 = 0; i0 < d; i0 += kDimChunk) {
      const int i1 = std::min(d, i0 + kDimChunk);
      for (size_t g = 0; g < padded; g += Gather::kLanes) {
        Gather::F acc = Gather::Load(partial + g);
        for (int i = i0; i < i1; i += 4) {
          const int w = std::min(i, d - 4);
          const Gather::I words = Gather::Words(base + w, offsets + g);
          for (int j = i; j < std::min(i + 4, i1); ++j) {
            acc = Gather::Add(acc, Gather::Lookup(table, words, 8 * (j - w), j * k));
          }
        }
        Gather::Store(partial + g, acc);
      }
    }
    std::memcpy(out + start, partial, count * sizeof(float));
  }
}
