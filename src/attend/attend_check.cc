// pion-attend-check: runs one attention call from raw little-endian f32 files, for
// cross-checks against an independent implementation (tests/integration/
// test_attend_numpy.py compares it with numpy in float64).
//
//   pion-attend-check <dir> <precision> <H_kv> <H_q> <N> <D> <M> <S> <window>
//
// Reads <dir>/k.f32 and v.f32 ([H_kv][N][D]), q.f32 ([H_q][M][D]) and, when S > 0,
// ksuf.f32 / vsuf.f32 ([H_kv][S][D]); writes <dir>/out.f32 ([H_q][M][D]) and lse.f32
// ([H_q][M]). Uses the default GQA head map. Exit status 0 on success, 1 with the
// error on stderr.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attend/attend.h"

namespace {

bool ReadFile(const std::string& path, size_t n, std::vector<float>* v) {
  v->assign(n, 0.0f);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  const size_t got = n ? std::fread(v->data(), sizeof(float), n, f) : 0;
  std::fclose(f);
  return got == n;
}

bool WriteFile(const std::string& path, const std::vector<float>& v) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const size_t put = std::fwrite(v.data(), sizeof(float), v.size(), f);
  return std::fclose(f) == 0 && put == v.size();
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "pion-attend-check: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pion::attend;
  if (argc != 10) {
    return Fail("usage: pion-attend-check <dir> <precision> <H_kv> <H_q> <N> <D> <M> <S> <window>");
  }
  const std::string dir = argv[1];
  const auto prec = ParsePrecision(argv[2]);
  if (!prec) return Fail("unknown precision");
  const uint32_t h_kv = std::strtoul(argv[3], nullptr, 10),
                 h_q = std::strtoul(argv[4], nullptr, 10), n = std::strtoul(argv[5], nullptr, 10),
                 d = std::strtoul(argv[6], nullptr, 10), m = std::strtoul(argv[7], nullptr, 10),
                 s = std::strtoul(argv[8], nullptr, 10);
  const int32_t window = std::atoi(argv[9]);
  std::vector<float> k, v, q, ks, vs;
  const size_t kv = static_cast<size_t>(h_kv) * n * d;
  if (!ReadFile(dir + "/k.f32", kv, &k) || !ReadFile(dir + "/v.f32", kv, &v) ||
      !ReadFile(dir + "/q.f32", static_cast<size_t>(h_q) * m * d, &q)) {
    return Fail("cannot read k/v/q");
  }
  if (s > 0 && (!ReadFile(dir + "/ksuf.f32", static_cast<size_t>(h_kv) * s * d, &ks) ||
                !ReadFile(dir + "/vsuf.f32", static_cast<size_t>(h_kv) * s * d, &vs))) {
    return Fail("cannot read the suffix");
  }
  Slot slot;
  pion::Status st = slot.StoreF32(*prec, h_kv, n, d, k.data(), v.data());
  if (!st.ok()) return Fail(st.ToString());
  AttendRequest r;
  r.q = q.data();
  r.h_q = h_q;
  r.m = m;
  r.d = d;
  r.window = window;
  r.s = s;
  if (s > 0) {
    r.k_suf = ks.data();
    r.v_suf = vs.data();
  }
  std::vector<float> out(static_cast<size_t>(h_q) * m * d), lse(static_cast<size_t>(h_q) * m);
  st = Attend(slot, r, out.data(), lse.data());
  if (!st.ok()) return Fail(st.ToString());
  if (!WriteFile(dir + "/out.f32", out) || !WriteFile(dir + "/lse.f32", lse)) {
    return Fail("cannot write the output");
  }
  return 0;
}
