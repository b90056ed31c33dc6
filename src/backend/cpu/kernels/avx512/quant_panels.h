// Q8_0 and Q4_0 for the row-panel engine (panel_engine.h): the prompt counterpart of
// quant_tiles.h's pair tiles, with the same bits. Codes enter vpdpbusd unsigned,
// u = q + (1 << kOffsetShift), and a block's sum starts at minus that offset times the
// activation quants' sum, as quant_tiles.h takes it off after its tree. Include only from files
// compiled with the avx512/ flags.
#pragma once

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/quant_tiles.h"
#include "backend/cpu/kernels/avx512/panel_engine.h"

namespace hearth::cpu::avx512 {

// A block's term as quant_tiles.h finishes it: float(isum) * (d_w * d_x), fused.
template <typename Base>
struct LegacyPanelFormat : Base {
  using Block = typename Base::Block;
  static constexpr int kGroupBlocks = static_cast<int>(kActGroupBlocks);
  static constexpr int kSide = 1;  // d_w
  static constexpr int kSums = 1;

  static int32_t start(int32_t xs) { return -(xs * (1 << Base::kOffsetShift)); }
  static __m512 finish(const float* side, const __m512i (&isum)[1], __m512 dx, int32_t,
                       __m512 acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_mul_ps(_mm512_load_ps(side), dx),
                           acc);
  }
};

template <typename Derived, typename Block>
void pack_legacy_group(const uint8_t* const (&rows)[kPanelRows], int valid, uint8_t* codes,
                       float* side) {
  static const Block kZero{};
  for (int k = 0; k < static_cast<int>(kActGroupBlocks); ++k) {
    const Block* at[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) {
      at[r] = rows[r] && k < valid ? reinterpret_cast<const Block*>(rows[r]) + k : &kZero;
    }
    __m512i a[8];
    for (int i = 0; i < 8; ++i) a[i] = Derived::two_rows(at[2 * i], at[2 * i + 1]);
    store_runs(a, codes + k * kPanelBlockBytes);
    alignas(32) uint16_t d[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) d[r] = at[r]->d;
    const __m256i halves = _mm256_load_si256(reinterpret_cast<const __m256i*>(d));
    _mm512_store_ps(side + k * kPanelRows, _mm512_maskz_cvtph_ps(0xffff, halves));
  }
}

struct PanelQ4_0 : LegacyPanelFormat<avx2::Q4_0Format> {
  // [row a's 32 codes | row b's 32]: low nibbles are weights 0-15, high nibbles 16-31.
  static __m512i two_rows(const Block* a, const Block* b) {
    const __m256i qa =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a->qs)));
    const __m256i qb =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)));
    const __m512i shifted =
        _mm512_maskz_srlv_epi64(0xff, join(qa, qb), _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
  }
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int valid, uint8_t* codes,
                         float* side) {
    pack_legacy_group<PanelQ4_0, Block>(rows, valid, codes, side);
  }
};

struct PanelQ8_0 : LegacyPanelFormat<avx2::Q8_0OffsetFormat> {
  // Offset binary: w + 128.
  static __m512i two_rows(const Block* a, const Block* b) {
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->qs));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    return _mm512_xor_si512(join(qa, qb), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static void pack_group(const uint8_t* const (&rows)[kPanelRows], int valid, uint8_t* codes,
                         float* side) {
    pack_legacy_group<PanelQ8_0, Block>(rows, valid, codes, side);
  }
};

}  // namespace hearth::cpu::avx512
