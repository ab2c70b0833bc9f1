//! Chunk identity: a BLAKE3 hash chain over the model identity, the chunk size and every
//! token of every chunk up to and including the chunk (vLLM's block hashing), and the
//! store tensor name that carries a chunk's id and its parent's.
//!
//! Byte layout (docs/formats/store.md, "Prefix cache"):
//! `h0 = blake3(CHAIN_DOMAIN || u64_le(len(model)) || model || u32_le(chunk_tokens))`,
//! `h_i = blake3(h_{i-1} || u32_le(t) for every token t of chunk i)`; the id of chunk `i`
//! is `u128_le(h_i[0..16])`.

/// Domain string that starts every chain (versioned: a change of scheme changes it).
pub const CHAIN_DOMAIN: &[u8] = b"tensorvault/prefix-chain/v1";

/// Prefix of a chunk tensor's name: `c.{id:032x}.{parent:032x}`.
pub const CHUNK_NAME_PREFIX: &str = "c.";

/// Length of a chunk tensor's name: `c.` + 32 hex + `.` + 32 hex.
pub const CHUNK_NAME_LEN: usize = 2 + 32 + 1 + 32;

/// The chain's running state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainState([u8; 32]);

impl ChainState {
    /// The chain's start for `model` and `chunk_tokens`.
    #[must_use]
    pub fn start(model: &str, chunk_tokens: u32) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(CHAIN_DOMAIN);
        h.update(&(model.len() as u64).to_le_bytes());
        h.update(model.as_bytes());
        h.update(&chunk_tokens.to_le_bytes());
        Self(*h.finalize().as_bytes())
    }

    /// The state after one more chunk of `tokens`.
    #[must_use]
    pub fn next(&self, tokens: &[u32]) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(&self.0);
        for t in tokens {
            h.update(&t.to_le_bytes());
        }
        Self(*h.finalize().as_bytes())
    }

    /// The chunk id this state names (its first 16 bytes, little-endian).
    #[must_use]
    pub fn id(&self) -> u128 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.0[..16]);
        u128::from_le_bytes(b)
    }
}

/// The ids of every full chunk of `tokens`, in order, each paired with its parent's id
/// (0 for the first chunk).
#[must_use]
pub fn chunk_ids(model: &str, chunk_tokens: u32, tokens: &[u32]) -> Vec<(u128, u128)> {
    let mut state = ChainState::start(model, chunk_tokens);
    let mut parent = 0u128;
    let mut out = Vec::with_capacity(tokens.len() / chunk_tokens.max(1) as usize);
    for chunk in tokens.chunks_exact(chunk_tokens.max(1) as usize) {
        state = state.next(chunk);
        out.push((state.id(), parent));
        parent = state.id();
    }
    out
}

/// The tensor name of chunk `id` whose parent is `parent` (0: the first chunk).
#[must_use]
pub fn chunk_name(id: u128, parent: u128) -> String {
    format!("{CHUNK_NAME_PREFIX}{id:032x}.{parent:032x}")
}

/// `(id, parent)` of a chunk tensor's name, `None` for any other name.
#[must_use]
pub fn parse_chunk_name(name: &str) -> Option<(u128, u128)> {
    if name.len() != CHUNK_NAME_LEN {
        return None;
    }
    let rest = name.strip_prefix(CHUNK_NAME_PREFIX)?;
    let (id, parent) = rest.split_once('.')?;
    let hex = |s: &str| {
        (s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then(|| u128::from_str_radix(s, 16).ok())
        .flatten()
    };
    Some((hex(id)?, hex(parent)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_others() {
        let n = chunk_name(0xabc, u128::MAX);
        assert_eq!(n.len(), CHUNK_NAME_LEN);
        assert_eq!(parse_chunk_name(&n), Some((0xabc, u128::MAX)));
        for bad in [
            "model",
            "L0.H0.k",
            &n[..n.len() - 1],
            &n.replace('c', "C"),
            &format!("c.{:032x}-{:032x}", 1, 2),
            &format!("c.{:032X}.{:032x}", 0xab, 2),
        ] {
            assert_eq!(parse_chunk_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_chunk_id_depends_on_every_earlier_token_the_model_and_the_chunk_size() {
        let toks: Vec<u32> = (0..64).collect();
        let a = chunk_ids("m", 16, &toks);
        assert_eq!(a.len(), 4);
        assert_eq!(a[0].1, 0);
        for w in a.windows(2) {
            assert_eq!(w[1].1, w[0].0);
        }
        // Same chunk contents after a different earlier token: different id.
        let mut other = toks.clone();
        other[3] = 999;
        let b = chunk_ids("m", 16, &other);
        assert!(a.iter().zip(&b).all(|(x, y)| x.0 != y.0));
        // A change in chunk 2 keeps chunks 0 and 1.
        let mut late = toks.clone();
        late[40] = 7;
        let c = chunk_ids("m", 16, &late);
        assert_eq!(&a[..2], &c[..2]);
        assert_ne!(a[2].0, c[2].0);
        assert_ne!(chunk_ids("m2", 16, &toks)[0].0, a[0].0);
        assert_ne!(
            chunk_ids("m", 32, &toks)[0].0,
            chunk_ids("m", 16, &toks)[1].0
        );
        // Model strings are length-prefixed: "ab" + chunk size differs from "a" + ...
        assert_ne!(ChainState::start("ab", 16), ChainState::start("a", 16));
        // A partial chunk is not a chunk.
        assert_eq!(chunk_ids("m", 16, &toks[..31]).len(), 1);
    }
}
