//! Data shared by the quant crate's benchmarks.

/// Bell-shaped like post-RoPE keys and values (a sum of three uniforms from a fixed
/// xorshift stream), 64 channels with an outlier channel every 16 and a per-channel offset.
pub fn kv_like(n: usize) -> Vec<f32> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            let mut g = 0.0f32;
            for _ in 0..3 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                g += (s >> 40) as f32 / (1u64 << 24) as f32;
            }
            let c = i % 64;
            (g - 1.5) * if c % 16 == 3 { 6.0 } else { 1.0 } + 0.05 * c as f32
        })
        .collect()
}
