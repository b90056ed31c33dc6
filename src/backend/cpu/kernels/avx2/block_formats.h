// Every block format (block_formats_32.h, block_formats_256.h), each templated on one ISA's 8-bit
// products.
#pragma once

// Last, in their own block: they switch on AVX2 code generation for everything below.
#include "backend/cpu/kernels/avx2/block_formats_256.h"
#include "backend/cpu/kernels/avx2/block_formats_32.h"
