//! Shared helpers of the CGEB tests: deterministic embeddings and the ColBERT aux case.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use tensorvault_formats::cgeb::FusedEmbedding;

/// xorshift64: deterministic values without a RNG dependency.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// A deterministic embedding of `dim` values, `experts` weights (softmax-like) and
/// `top_k` selected experts.
pub fn embedding(seed: u64, dim: usize, experts: usize, top_k: usize) -> FusedEmbedding {
    let mut r = xorshift(seed);
    let mut f = move || ((r() >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
    let vector: Vec<f32> = (0..dim).map(|_| f()).collect();
    let mut weights: Vec<f32> = (0..experts).map(|_| f() + 0.5).collect();
    let sum: f32 = weights.iter().sum::<f32>().max(f32::MIN_POSITIVE);
    weights.iter_mut().for_each(|w| *w /= sum);
    let mut order: Vec<u8> = (0..experts as u8).collect();
    order.sort_by(|&a, &b| weights[b as usize].total_cmp(&weights[a as usize]));
    let mut e = FusedEmbedding::new(vector, weights, order[..top_k].to_vec());
    e.pipeline_latency_us = seed * 1000 + 17;
    e
}

/// The seed's realistic aux payload: 100 ColBERT tokens x 128 dims of f32 (LE bytes),
/// with the low mantissa bits cleared as after an fp16 round trip so it compresses like
/// real token vectors do.
pub fn colbert_aux(seed: u64) -> Vec<u8> {
    let mut r = xorshift(seed ^ 0xc01b);
    (0..100 * 128)
        .flat_map(|_| {
            let x = ((r() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2;
            f32::from_bits(x.to_bits() & 0xffff_e000).to_le_bytes()
        })
        .collect()
}

/// The seed's 1536/8/2 embedding.
pub fn seed_embedding(seed: u64) -> FusedEmbedding {
    embedding(seed, 1536, 8, 2)
}
