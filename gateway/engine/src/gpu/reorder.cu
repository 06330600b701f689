// Reorder kernels: each places the packets of one batch into their slots of
// the aggregate and converts their samples, as the CPU plans do
// (gateway/engine/src/reorder/convert.rs is the bit-exact oracle).
//
// Slot s's source (SLOT_SOURCE) is the device address of its payload (in_len bytes), or 0
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

// Input types: bits per sample and how one is read from bytes.
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

// Output types: bytes per sample and their bits (low bytes first).
struct Fp16 {
    enum { BYTES = 2 };
    static __device__ u64 bits(int v) {
        u16 h;
        asm("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"((float)v));
        return h;
    }
};
struct Bf16 {
    enum { BYTES = 2 };
    static __device__ u64 bits(int v) {
        u16 h;
        asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"((float)v));
        return h;
    }
};
struct Fp32 {
    enum { BYTES = 4 };
    static __device__ u64 bits(int v) { return __float_as_uint((float)v); }
};
struct Fp64 {
    enum { BYTES = 8 };
    static __device__ u64 bits(int v) { return (u64)__double_as_longlong((double)v); }
};
struct I32 {
    enum { BYTES = 4 };
    static __device__ u64 bits(int v) { return (u32)v; }
};

// The word path keeps everything in registers: samples are cut from the
// 16-byte word with shifts and outputs assembled into 32-bit words, since a
// byte array read through other pointer types would live in local memory.
__device__ __forceinline__ u32 lane(const uint4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ u32 byte_of(const uint4& v, int i) { return (lane(v, i / 4) >> (8 * (i % 4))) & 0xff; }

template <typename In> struct Word;
template <> struct Word<Int4> {
    static __device__ int sample(const uint4& v, int i, bool) {
        signed char b = (signed char)byte_of(v, i / 2);
        return (i & 1) ? ((signed char)(b << 4)) >> 4 : b >> 4;
    }
};
template <> struct Word<Int8> {
    static __device__ int sample(const uint4& v, int i, bool) { return (signed char)byte_of(v, i); }
};
template <> struct Word<Int16> {
    static __device__ int sample(const uint4& v, int i, bool network) {
        u32 h = (lane(v, i / 2) >> (16 * (i % 2))) & 0xffff;
        return (short)(network ? ((h & 0xff) << 8) | (h >> 8) : h);
    }
};
template <> struct Word<Int32> {
    static __device__ int sample(const uint4& v, int i, bool network) {
        u32 w = lane(v, i);
        return (int)(network ? __byte_perm(w, 0, 0x0123) : w);
    }
};

// Output sample i into 32-bit words o[] (zeroed for two-byte outputs).
template <typename Out> __device__ __forceinline__ void put_word(u32* o, int i, int v) {
    const u64 bits = Out::bits(v);
    if (Out::BYTES == 2) {
        o[i / 2] |= (u32)bits << (16 * (i % 2));
    } else if (Out::BYTES == 4) {
        o[i] = (u32)bits;
    } else {
        o[2 * i] = (u32)bits;
        o[2 * i + 1] = (u32)(bits >> 32);
    }
}

// Stores N 32-bit words with the widest aligned stores.
template <int N>
__device__ __forceinline__ void store(u8* dst, const u32* o) {
    if (N % 4 == 0) {
#pragma unroll
        for (int k = 0; k < N; k += 4) *(uint4*)(dst + 4 * k) = make_uint4(o[k], o[k + 1], o[k + 2], o[k + 3]);
    } else if (N % 2 == 0) {
#pragma unroll
        for (int k = 0; k < N; k += 2) *(uint2*)(dst + 4 * k) = make_uint2(o[k], o[k + 1]);
    } else {
#pragma unroll
        for (int k = 0; k < N; ++k) *(u32*)(dst + 4 * k) = o[k];
    }
}

// One input unit (16 bytes) into its outputs, a sample at a time.
template <typename In, typename Out> struct WordConvert {
    enum { IN_BYTES = 16, OUT_WORDS = (128 / In::BITS) * Out::BYTES / 4 };
    static __device__ __forceinline__ void run(const u8* src, u32* out, bool network) {
        const uint4 word = *(const uint4*)src;
#pragma unroll
        for (int k = 0; k < OUT_WORDS; ++k) out[k] = 0;
#pragma unroll
        for (int i = 0; i < 128 / In::BITS; ++i) put_word<Out>(out, i, Word<In>::sample(word, i, network));
    }
};

// int4 -> fp16, four input bytes per thread so that a warp's 16-byte stores
// are contiguous (64 output bytes per thread halved the bandwidth), and no
// conversion instructions: a nibble with its sign bit flipped is u = v + 8
// in 0..15, the fp16 bits 0x6400 | u are exactly 1024 + u, and one f16x2
// subtraction of 1032 leaves v, exact (and +0 for 0, as the oracle).
template <> struct WordConvert<Int4, Fp16> {
    enum { IN_BYTES = 4, OUT_WORDS = 4 };
    static __device__ __forceinline__ void run(const u8* src, u32* out, bool) {
        const u32 flipped = *(const u32*)src ^ 0x88888888u;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            // Byte b twice, in both halves; sample 2b is its high nibble.
            const u32 twice = __byte_perm(flipped, 0, 0x4040 | (b << 8) | b);
            const u32 biased = ((twice >> 4) & 0x0000000fu) | (twice & 0x000f0000u) | 0x64006400u;
            asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(out[b]) : "r"(biased), "r"(0x64086408u));
        }
    }
};

// One slot: a thread per input unit (16 bytes; 4 for int4 -> fp16) where
// the payload allows (aligned, whole 16-byte words), else per sample.
template <typename In, typename Out>
__device__ void place(const u8* src, u32 in_len, u8* dst, bool network, u32 first, u32 step) {
    const u32 samples = in_len * 8 / In::BITS;
    if (src == 0) {
        for (u32 i = first; i < samples; i += step) {
            for (int k = 0; k < Out::BYTES; ++k) dst[(u64)i * Out::BYTES + k] = 0;
        }
        return;
    }
    const bool words = ((u64)src % 16 == 0) && (in_len % 16 == 0) && ((u64)dst % 16 == 0);
    if (words) {
        typedef WordConvert<In, Out> Unit;
        for (u32 w = first; w < in_len / Unit::IN_BYTES; w += step) {
            u32 out[Unit::OUT_WORDS];
            Unit::run(src + (u64)w * Unit::IN_BYTES, out, network);
            store<Unit::OUT_WORDS>(dst + (u64)w * Unit::OUT_WORDS * 4, out);
        }
    } else {
        for (u32 i = first; i < samples; i += step) {
            const u64 bits = Out::bits(In::sample(src, i, network));
            for (int k = 0; k < Out::BYTES; ++k) dst[(u64)i * Out::BYTES + k] = (u8)(bits >> (8 * k));
        }
    }
}

// A batch of up to SLOTS_BY_VALUE slots passes its slot addresses in the
// launch itself, as a kernel parameter (up to 32 KB of them from CUDA 12.1 on
// compute capability 7.0): a block then starts without first reading its
// slot's address from pinned host memory across PCIe, which took the first
// microseconds of a small batch. A larger batch passes `sources`, that table
// in pinned memory, where the work hides the wait.
#ifndef SLOTS_BY_VALUE
#define SLOTS_BY_VALUE 1
#endif
struct SlotsByValue {
    u64 at[SLOTS_BY_VALUE];
};
#define SLOT_SOURCE(s) ((const u8*)(slots <= SLOTS_BY_VALUE ? by_value.at[s] : sources[s]))
#define REORDER_PARAMS const SlotsByValue by_value, const u64 *sources, u32 slots, u32 in_len, u8 *out, u32 out_len

// The grid's y dimension walks slots, x the work within a slot.
#define REORDER(name, In, Out, network)                                                    \
    extern "C" __global__ void name(REORDER_PARAMS) {                                      \
        for (u32 s = blockIdx.y; s < slots; s += gridDim.y) {                               \
            place<In, Out>(SLOT_SOURCE(s), in_len, out + (u64)s * out_len, network,          \
                           blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x); \
        }                                                                                    \
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
extern "C" __global__ void reorder_copy(REORDER_PARAMS) {
    for (u32 s = blockIdx.y; s < slots; s += gridDim.y) {
        const u8* src = SLOT_SOURCE(s);
        u8* dst = out + (u64)s * out_len;
        const u32 first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
        if (src != 0 && (u64)src % 16 == 0 && (u64)dst % 16 == 0 && in_len % 16 == 0) {
            for (u32 w = first; w < in_len / 16; w += step) ((uint4*)dst)[w] = ((const uint4*)src)[w];
        } else {
            for (u32 i = first; i < in_len; i += step) dst[i] = src ? src[i] : 0;
        }
    }
}

// A burst's segments from where the CPU landed them (pinned memory the GPU
// maps) into their device buffers: per packet (source, destination, bytes),
// three u64s. One launch per burst, a block row per packet.
extern "C" __global__ void gather_copy(const u64* copies, u32 count) {
    for (u32 p = blockIdx.y; p < count; p += gridDim.y) {
        const u8* src = (const u8*)copies[3 * p];
        u8* dst = (u8*)copies[3 * p + 1];
        const u32 len = (u32)copies[3 * p + 2];
        const u32 first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
        const u32 words = ((u64)src % 16 == 0 && (u64)dst % 16 == 0) ? len / 16 : 0;
        for (u32 w = first; w < words; w += step) ((uint4*)dst)[w] = ((const uint4*)src)[w];
        for (u32 i = words * 16 + first; i < len; i += step) dst[i] = src[i];
    }
}

// DAQIRI's exported kernels (libdaqiri's packet_reorder_copy_payload_by_sequence
// and packet_gather_copy_payload, which its programs launch on their own
// streams): a block per packet, which reads the packet's sequence number
// itself. packets[p] is the device address of packet p (0: skipped); its
// payload starts payload_offset bytes in. The sequence number is the
// seq_width bits from bit seq_offset of the packet, most significant
// first; its slot is seq % per_batch, and packets past max_slot are
// skipped. Packet 0 writes the batch id to batch_out (when not 0): the
// batch field when has_batch, else seq / per_batch. Slots without a
// packet are left as they were.

__device__ u32 bits_msb_first(const u8* p, u32 offset, u32 width) {
    u32 value = 0;
    for (u32 i = 0; i < width; ++i) {
        const u32 bit = offset + i;
        value = (value << 1) | ((p[bit / 8] >> (7 - bit % 8)) & 1u);
    }
    return value;
}

// The slot of the block's packet, or -1 to skip it; writes the batch id.
__device__ long long sequence_slot(const u8* packet, u32 seq_offset, u32 seq_width, u32 batch_offset,
                                   u32 batch_width, u32 has_batch, u32 per_batch, u32 max_slot, u64* batch_out) {
    const u32 seq = bits_msb_first(packet, seq_offset, seq_width);
    if (blockIdx.x == 0 && batch_out != 0) {
        *batch_out = has_batch ? (u64)bits_msb_first(packet, batch_offset, batch_width) : (u64)(seq / per_batch);
    }
    const u32 slot = seq % per_batch;
    return slot > max_slot ? -1 : (long long)slot;
}

__device__ void copy_bytes(const u8* src, u8* dst, u32 len, u32 first, u32 step) {
    const u32 words = ((u64)src % 16 == 0 && (u64)dst % 16 == 0) ? len / 16 : 0;
    for (u32 w = first; w < words; w += step) ((uint4*)dst)[w] = ((const uint4*)src)[w];
    for (u32 i = words * 16 + first; i < len; i += step) dst[i] = src[i];
}

#define SEQUENCE_PARAMS                                                                                   \
    const u64 *packets, u32 count, u32 payload_offset, u32 in_len, u8 *out, u32 out_len, u32 seq_offset, \
        u32 seq_width, u32 batch_offset, u32 batch_width, u32 has_batch, u32 per_batch, u32 max_slot,    \
        u64 *batch_out

#define SEQUENCE_SLOT                                                                                      \
    if (blockIdx.x >= count || packets[blockIdx.x] == 0) return;                                           \
    const u8* packet = (const u8*)packets[blockIdx.x];                                                     \
    const long long slot = sequence_slot(packet, seq_offset, seq_width, batch_offset, batch_width,        \
                                         has_batch, per_batch, max_slot, batch_out);                       \
    if (slot < 0) return;                                                                                  \
    u8* dst = out + (u64)slot * out_len;

#define BY_SEQUENCE(name, In, Out, network)                                                       \
    extern "C" __global__ void name(SEQUENCE_PARAMS) {                                          \
        SEQUENCE_SLOT                                                                             \
        place<In, Out>(packet + payload_offset, in_len, dst, network, threadIdx.x, blockDim.x);  \
    }

#define BY_SEQUENCE_OUTPUTS(in, In, network, order)                   \
    BY_SEQUENCE(by_sequence_##in##_fp16_##order, In, Fp16, network)   \
    BY_SEQUENCE(by_sequence_##in##_bf16_##order, In, Bf16, network)   \
    BY_SEQUENCE(by_sequence_##in##_fp32_##order, In, Fp32, network)   \
    BY_SEQUENCE(by_sequence_##in##_fp64_##order, In, Fp64, network)   \
    BY_SEQUENCE(by_sequence_##in##_int32_##order, In, I32, network)

#define BY_SEQUENCE_ORDERS(in, In)                  \
    BY_SEQUENCE_OUTPUTS(in, In, false, host)        \
    BY_SEQUENCE_OUTPUTS(in, In, true, network)

BY_SEQUENCE_ORDERS(int4, Int4)
BY_SEQUENCE_ORDERS(int8, Int8)
BY_SEQUENCE_ORDERS(int16, Int16)
BY_SEQUENCE_ORDERS(int32, Int32)

extern "C" __global__ void by_sequence_copy(SEQUENCE_PARAMS) {
    SEQUENCE_SLOT
    copy_bytes(packet + payload_offset, dst, in_len, threadIdx.x, blockDim.x);
}

// Packet p's payload to slot p, in arrival order (no sequence number).
extern "C" __global__ void gather_payloads(const u64* packets, u32 count, u32 payload_offset, u32 len, u8* out) {
    if (blockIdx.x >= count || packets[blockIdx.x] == 0) return;
    copy_bytes((const u8*)packets[blockIdx.x] + payload_offset, out + (u64)blockIdx.x * len, len, threadIdx.x,
               blockDim.x);
}
