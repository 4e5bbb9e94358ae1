// The IDX reader (datasets/idx_reader.cc), plain and gzip-compressed.
// Byte 0: bit 0 chooses labels (1) or images (0); bit 1 gzips the rest first
// (so the reader inflates a valid stream; mutated gzip bytes reach it too),
// then the file.
#include <zlib.h>

#include <string>
#include <vector>

#include "datasets/idx_reader.h"
#include "fuzz/fuzz_util.h"

using namespace hedgedb;
using hedgedb::datasets::IdxImages;
using hedgedb::datasets::ReadIdxImages;
using hedgedb::datasets::ReadIdxLabels;

namespace {

std::string Gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(size)) + 32, '\0');
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = uInt(size);
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool labels = data[0] & 1;
  std::string path;
  if (data[0] & 2) {
    const std::string gz = Gzip(data + 1, size - 1);
    path = fuzz::WriteScratch("in.idx.gz", reinterpret_cast<const uint8_t*>(gz.data()), gz.size());
  } else {
    path = fuzz::WriteScratch("in.idx", data + 1, size - 1);
  }
  if (labels) {
    std::vector<int64_t> out;
    (void)ReadIdxLabels(path, &out);
  } else {
    IdxImages images;
    if (ReadIdxImages(path, &images).ok() && images.count > 0) {
      // The sizes must match the buffer (ASan checks these reads).
      volatile uint8_t first = images.image(0)[0];
      volatile uint8_t last = images.image(images.count - 1)[images.pixels_per_image() - 1];
      (void)first;
      (void)last;
    }
  }
  return 0;
}
