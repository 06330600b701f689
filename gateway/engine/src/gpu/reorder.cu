// Reorder kernels: each places the packets of one batch into their slots of
// the aggregate and converts their samples, as the CPU plans do
// (gateway/engine/src/reorder/convert.rs is the bit-exact oracle).
//
// sources[s] is the device address of slot s's payload (in_len bytes), or 0
// for a slot whose packet never came: its output is zeroed. Slot s is
// written at out + s * out_len. Integers become float with round to nearest
// even ((float)v); fp16 and bf16 then round to nearest even, as
// __float2half_rn and __float2bfloat16_rn do; fp64 and int32 are exact.
//
// Compiled at run time by NVRTC, without CUDA headers: the conversions are
// written as PTX `cvt` instructions.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Input types: samples per 16-byte word and how one is read.
struct Int4 {
    enum { BITS = 4 };
    static __device__ int sample(const u8* p, u32 i, bool) {
        signed char b = (signed char)p[i / 2];
        return (i & 1) ? ((signed char)(b << 4)) >> 4 : b >> 4;
    }
};
struct Int8 {
    enum { BITS = 8 };
    static __device__ int sample(const u8* p, u32 i, bool) { return (signed char)p[i]; }
};
struct Int16 {
    enum { BITS = 16 };
    static __device__ int sample(const u8* p, u32 i, bool network) {
        u32 a = p[2 * i], b = p[2 * i + 1];
        return (short)(network ? (a << 8) | b : (b << 8) | a);
    }
};
struct Int32 {
    enum { BITS = 32 };
    static __device__ int sample(const u8* p, u32 i, bool network) {
        u32 a = p[4 * i], b = p[4 * i + 1], c = p[4 * i + 2], d = p[4 * i + 3];
        return (int)(network ? (a << 24) | (b << 16) | (c << 8) | d : (d << 24) | (c << 16) | (b << 8) | a);
    }
};

// Output types: bytes per sample and how one is written.
struct Fp16 {
    enum { BYTES = 2 };
    static __device__ void put(u8* o, int v) {
        u16 h;
        asm("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"((float)v));
        *(u16*)o = h;
    }
};
struct Bf16 {
    enum { BYTES = 2 };
    static __device__ void put(u8* o, int v) {
        u16 h;
        asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"((float)v));
        *(u16*)o = h;
    }
};
struct Fp32 {
    enum { BYTES = 4 };
    static __device__ void put(u8* o, int v) { *(float*)o = (float)v; }
};
struct Fp64 {
    enum { BYTES = 8 };
    static __device__ void put(u8* o, int v) { *(double*)o = (double)v; }
};
struct I32 {
    enum { BYTES = 4 };
    static __device__ void put(u8* o, int v) { *(int*)o = v; }
};

// Stores `bytes` (a multiple of 4) from registers with the widest aligned stores.
template <int BYTES>
__device__ void store(u8* dst, const u8* src) {
    if (BYTES % 16 == 0) {
        for (int k = 0; k < BYTES; k += 16) *(uint4*)(dst + k) = *(const uint4*)(src + k);
    } else if (BYTES % 8 == 0) {
        for (int k = 0; k < BYTES; k += 8) *(uint2*)(dst + k) = *(const uint2*)(src + k);
    } else {
        for (int k = 0; k < BYTES; k += 4) *(u32*)(dst + k) = *(const u32*)(src + k);
    }
}

// One slot: a thread per 16 input bytes where the payload allows (aligned,
// whole words), else a thread per sample.
template <typename In, typename Out>
__device__ void place(const u8* src, u32 in_len, u8* dst, bool network, u32 first, u32 step) {
    const u32 samples = in_len * 8 / In::BITS;
    const u32 per_word = 128 / In::BITS;
    if (src == 0) {
        for (u32 i = first; i < samples; i += step) {
            for (int k = 0; k < Out::BYTES; ++k) dst[(u64)i * Out::BYTES + k] = 0;
        }
        return;
    }
    const bool words = ((u64)src % 16 == 0) && (in_len % 16 == 0) && ((u64)dst % 16 == 0);
    if (words) {
        for (u32 w = first; w < in_len / 16; w += step) {
            __align__(16) u8 word[16];
            *(uint4*)word = *(const uint4*)(src + (u64)w * 16);
            __align__(16) u8 out[per_word * Out::BYTES];
#pragma unroll
            for (u32 i = 0; i < per_word; ++i) Out::put(out + i * Out::BYTES, In::sample(word, i, network));
            store<per_word * Out::BYTES>(dst + (u64)w * per_word * Out::BYTES, out);
        }
    } else {
        for (u32 i = first; i < samples; i += step) {
            __align__(8) u8 out[Out::BYTES];
            Out::put(out, In::sample(src, i, network));
            for (int k = 0; k < Out::BYTES; ++k) dst[(u64)i * Out::BYTES + k] = out[k];
        }
    }
}

// The grid's y dimension walks slots, x the work within a slot.
#define REORDER(name, In, Out, network)                                                              \
    extern "C" __global__ void name(const u64* sources, u32 slots, u32 in_len, u8* out, u32 out_len) { \
        for (u32 s = blockIdx.y; s < slots; s += gridDim.y) {                                         \
            place<In, Out>((const u8*)sources[s], in_len, out + (u64)s * out_len, network,             \
                           blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);           \
        }                                                                                              \
    }

#define FOR_OUTPUTS(in, In, network, order)        \
    REORDER(reorder_##in##_fp16_##order, In, Fp16, network) \
    REORDER(reorder_##in##_bf16_##order, In, Bf16, network) \
    REORDER(reorder_##in##_fp32_##order, In, Fp32, network) \
    REORDER(reorder_##in##_fp64_##order, In, Fp64, network) \
    REORDER(reorder_##in##_int32_##order, In, I32, network)

#define FOR_ORDERS(in, In)                 \
    FOR_OUTPUTS(in, In, false, host)       \
    FOR_OUTPUTS(in, In, true, network)

FOR_ORDERS(int4, Int4)
FOR_ORDERS(int8, Int8)
FOR_ORDERS(int16, Int16)
FOR_ORDERS(int32, Int32)

// No data_types: the payload as it is, 16 bytes per thread where aligned.
extern "C" __global__ void reorder_copy(const u64* sources, u32 slots, u32 in_len, u8* out, u32 out_len) {
    for (u32 s = blockIdx.y; s < slots; s += gridDim.y) {
        const u8* src = (const u8*)sources[s];
        u8* dst = out + (u64)s * out_len;
        const u32 first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
        if (src != 0 && (u64)src % 16 == 0 && (u64)dst % 16 == 0 && in_len % 16 == 0) {
            for (u32 w = first; w < in_len / 16; w += step) ((uint4*)dst)[w] = ((const uint4*)src)[w];
        } else {
            for (u32 i = first; i < in_len; i += step) dst[i] = src ? src[i] : 0;
        }
    }
}
