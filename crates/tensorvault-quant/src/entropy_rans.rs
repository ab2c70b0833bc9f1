//! Interleaved rANS over a static table (`docs/formats/quant.md` §12.2).
//!
//! Each lane is a 32-bit state in `[RANS_L, 2^32)` with `RANS_L = 2^16`, renormalized
//! 16 bits at a time. Symbol `i` belongs to lane `i % N`. The encoder runs backwards and
//! the decoder reads forwards: the stream starts with the `N` final encoder states (lane
//! 0 first, each as two little-endian u16 words, low word first), then the words in the
//! order the decoder consumes them. Decoding every symbol brings each lane back to
//! `RANS_L`, the encoder's start state, which the decoder checks.
//!
//! 1 to 8 lanes decode here, with the lanes' states in registers; 16 to 64 lanes
//! (`lanes_log2` 4..=6) in [`crate::entropy_rans_wide`] (the encoder here writes every
//! lane count), with AVX-512 or AVX2 where the CPU has them and a portable loop that gives
//! the same symbols and errors for every stream.
//!
//! The decoder never reads past the stream (a typed error), never loops more than once
//! per symbol, and cannot overflow: with every frequency `f <= 2^p` and a state `x <
//! 2^32`, `f * (x >> p) + bias < 2^32`, and a state `>= 2^16` stays `>= 16` after a step,
//! so one renormalization restores `x >= 2^16`.

use crate::error::corrupt;
use crate::layout::{RANS_L, RANS_STATE_BYTES, RANS_WORD_BITS, RANS_WORD_BYTES};
use crate::QuantError;

/// One decoder slot packed in a u32 (one load per symbol): bits 0..8 the symbol, 8..20
/// the slot's offset within the symbol's range, 20..32 the symbol's frequency minus 1
/// (frequencies are 1..=4096, offsets < 4096).
pub(crate) type DecEntry = u32;

/// Most lanes [`decode`] takes (8, states in registers); more decode in
/// [`crate::entropy_rans_wide`].
pub(crate) const NARROW_MAX_LANES_LOG2: u8 = 3;

fn entry(sym: u8, bias: u16, freq: u16) -> DecEntry {
    u32::from(sym) | u32::from(bias) << 8 | (u32::from(freq) - 1) << 20
}

/// Append the stream for `codes` (each with a nonzero frequency in `t`) to `out`.
/// `freqs` sum to `2^prob_bits`.
pub(crate) fn encode(
    codes: &[u8],
    freqs: &[u16],
    prob_bits: u8,
    lanes_log2: u8,
    out: &mut Vec<u8>,
) {
    match lanes_log2 {
        0 => encode_n::<1>(codes, freqs, prob_bits, out),
        1 => encode_n::<2>(codes, freqs, prob_bits, out),
        2 => encode_n::<4>(codes, freqs, prob_bits, out),
        3 => encode_n::<8>(codes, freqs, prob_bits, out),
        4 => encode_n::<16>(codes, freqs, prob_bits, out),
        5 => encode_n::<32>(codes, freqs, prob_bits, out),
        _ => encode_n::<64>(codes, freqs, prob_bits, out),
    }
}

/// Cumulative frequencies (`cum[s]` = sum of the frequencies below `s`).
fn cumulative(freqs: &[u16]) -> Vec<u32> {
    let mut acc = 0u32;
    freqs
        .iter()
        .map(|&f| {
            let c = acc;
            acc += u32::from(f);
            c
        })
        .collect()
}

/// The decoder's slot table: one entry per slot, `2^prob_bits` in all when `freqs` sum
/// to it.
pub(crate) fn decode_table(freqs: &[u16]) -> Vec<DecEntry> {
    let total: usize = freqs.iter().map(|&f| usize::from(f)).sum();
    let mut t = Vec::with_capacity(total);
    for (sym, &f) in freqs.iter().enumerate() {
        for bias in 0..f {
            t.push(entry(sym as u8, bias, f));
        }
    }
    t
}

/// What the encoder needs of one symbol, in one load: the state bound above which a word
/// is flushed first (`((RANS_L >> p) << 16) * f`, in u64: `f` may be `2^p`), the
/// reciprocal of [`reciprocal`], the frequency and the cumulative frequency.
#[derive(Clone, Copy, Default)]
struct EncSym {
    x_max: u64,
    rcp: u64,
    freq: u32,
    cum: u32,
}

/// Encode one symbol on a lane's state `s`, pushing the renormalization word first.
#[inline(always)]
fn put(s: &mut u32, e: &EncSym, pb: u32, words: &mut Vec<u16>) {
    if u64::from(*s) >= e.x_max {
        words.push(*s as u16);
        *s >>= RANS_WORD_BITS;
    }
    let q = div_by(*s, e.freq, e.rcp);
    *s = (q << pb) + (*s - q * e.freq) + e.cum;
}

fn encode_n<const N: usize>(codes: &[u8], freqs: &[u16], prob_bits: u8, out: &mut Vec<u8>) {
    let pb = u32::from(prob_bits);
    // A 256-entry table: any u8 code indexes it without a bounds check (symbols past the
    // alphabet never occur: every code has a nonzero frequency).
    let mut tab = [EncSym::default(); 256];
    for ((t, &f), c) in tab.iter_mut().zip(freqs).zip(cumulative(freqs)) {
        let f = u32::from(f);
        *t = EncSym {
            x_max: (u64::from(RANS_L >> pb) << RANS_WORD_BITS) * u64::from(f),
            rcp: reciprocal(f),
            freq: f,
            cum: c,
        };
    }
    let mut x = [RANS_L; N];
    // Words in reverse order of reading (at most one per symbol); reversed at the end.
    let mut words: Vec<u16> = Vec::with_capacity(codes.len() + 2 * N);
    // Symbol i is on lane i % N; the encoder runs from the last symbol down: first the
    // partial run at the end (lanes 0 .. len % N), then each whole run of N, lane N-1
    // first. The lanes' states stay in registers.
    let whole = codes.len() / N * N;
    let (head, tail) = codes.split_at(whole);
    for (s, &c) in x.iter_mut().zip(tail).rev() {
        put(s, &tab[usize::from(c)], pb, &mut words);
    }
    if N <= 8 {
        for run in head.chunks_exact(N).rev() {
            for (s, &c) in x.iter_mut().zip(run).rev() {
                put(s, &tab[usize::from(c)], pb, &mut words);
            }
        }
    } else {
        // 16 to 64 lanes: the same order (lane N-1 first), 8 lanes' states at a time in
        // locals (a copy in and out per 8 symbols) so they stay in registers.
        for run in head.chunks_exact(N).rev() {
            for (xs, cs) in x.chunks_exact_mut(8).zip(run.chunks_exact(8)).rev() {
                let mut g = [0u32; 8];
                g.copy_from_slice(xs);
                for (s, &c) in g.iter_mut().zip(cs).rev() {
                    put(s, &tab[usize::from(c)], pb, &mut words);
                }
                xs.copy_from_slice(&g);
            }
        }
    }
    for &s in x.iter().rev() {
        words.push((s >> RANS_WORD_BITS) as u16);
        words.push(s as u16);
    }
    let start = out.len();
    out.resize(start + words.len() * RANS_WORD_BYTES, 0);
    for (d, w) in out[start..]
        .chunks_exact_mut(RANS_WORD_BYTES)
        .zip(words.iter().rev())
    {
        d.copy_from_slice(&w.to_le_bytes());
    }
}

/// `ceil(2^64 / f)` for `f >= 2` (0 for `f < 2`): with it, [`div_by`] divides any u32 by
/// `f` exactly with one 64x64-bit multiply (Lemire, Kaser and Kurz, "Faster remainder by
/// direct computation", 2019: exact for every 32-bit numerator and divisor).
fn reciprocal(f: u32) -> u64 {
    if f < 2 {
        0
    } else {
        u64::MAX / u64::from(f) + 1
    }
}

/// `x / f` with `m = reciprocal(f)`.
#[inline(always)]
fn div_by(x: u32, f: u32, m: u64) -> u32 {
    if f < 2 {
        x // f is 1 (a symbol that occurs never has frequency 0)
    } else {
        ((u128::from(m) * u128::from(x)) >> 64) as u32
    }
}

/// Decode `out.len()` symbols from `stream`, which starts at segment offset `base`, with
/// 1 to 8 lanes (`lanes_log2` 0..=3; 16 to 64 lanes decode in
/// [`crate::entropy_rans_wide`]). `freqs` must sum to exactly `2^prob_bits` (the table
/// parser checks it).
pub(crate) fn decode(
    stream: &[u8],
    base: usize,
    freqs: &[u16],
    prob_bits: u8,
    lanes_log2: u8,
    out: &mut [u8],
) -> Result<(), QuantError> {
    let table = checked_table(freqs, prob_bits, base)?;
    match lanes_log2 {
        0 => decode_n::<1>(stream, base, &table, prob_bits, out),
        1 => decode_n::<2>(stream, base, &table, prob_bits, out),
        2 => decode_n::<4>(stream, base, &table, prob_bits, out),
        _ => decode_n::<8>(stream, base, &table, prob_bits, out),
    }
}

/// [`decode_table`] of `freqs`, checked to have exactly `2^prob_bits` entries.
pub(crate) fn checked_table(
    freqs: &[u16],
    prob_bits: u8,
    base: usize,
) -> Result<Vec<DecEntry>, QuantError> {
    let table = decode_table(freqs);
    if table.len() != 1usize << prob_bits {
        // The table parser guarantees this; checked here so no caller can index past it.
        return Err(corrupt(
            "frequency sum",
            base,
            table.len() as u64,
            "the frequencies must sum to 2^prob_bits",
        ));
    }
    Ok(table)
}

/// Check the stream's length is whole words and read its first `x.len()` lane states
/// into `x`; the words that follow the states.
pub(crate) fn read_states<'s>(
    stream: &'s [u8],
    base: usize,
    x: &mut [u32],
) -> Result<&'s [u8], QuantError> {
    let present = base + stream.len();
    if !stream.len().is_multiple_of(RANS_WORD_BYTES) {
        return Err(corrupt(
            "rans stream",
            base,
            stream.len() as u64,
            "its length must be a whole number of 16-bit words",
        ));
    }
    let states_len = x.len() * RANS_STATE_BYTES;
    let Some(states) = stream.get(..states_len) else {
        return Err(QuantError::Truncated {
            what: "rans states",
            offset: base as u64,
            end: (base + states_len) as u64,
            present,
        });
    };
    for (j, (s, b)) in x
        .iter_mut()
        .zip(states.chunks_exact(RANS_STATE_BYTES))
        .enumerate()
    {
        *s = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if *s < RANS_L {
            return Err(corrupt(
                "rans state",
                base + j * RANS_STATE_BYTES,
                (*s).into(),
                "a lane's initial state must be >= 2^16",
            ));
        }
    }
    Ok(&stream[states_len..])
}

/// The checks after the last symbol: every word read (`pos` of `words_len`) and every
/// lane back at `RANS_L`. `base` is the stream's segment offset, `present` the end of the
/// bytes.
pub(crate) fn finish(
    x: &[u32],
    base: usize,
    pos: usize,
    words_len: usize,
    present: usize,
) -> Result<(), QuantError> {
    let words_at = base + x.len() * RANS_STATE_BYTES;
    if pos != words_len {
        return Err(QuantError::TrailingBytes {
            expected: (words_at + pos) as u64,
            present,
        });
    }
    if let Some(j) = x.iter().position(|&s| s != RANS_L) {
        return Err(corrupt(
            "rans final state",
            base + j * RANS_STATE_BYTES,
            x[j].into(),
            "decoding every symbol must bring each lane back to 2^16",
        ));
    }
    Ok(())
}

/// The error for a renormalization that needs the word at `pos` of a stream whose words
/// start at segment offset `words_at`.
pub(crate) fn truncated(words_at: usize, pos: usize, present: usize) -> QuantError {
    QuantError::Truncated {
        what: "rans stream",
        offset: (words_at + pos) as u64,
        end: (words_at + pos + RANS_WORD_BYTES) as u64,
        present,
    }
}

fn decode_n<const N: usize>(
    stream: &[u8],
    base: usize,
    table: &[DecEntry],
    prob_bits: u8,
    out: &mut [u8],
) -> Result<(), QuantError> {
    let present = base + stream.len();
    let mut x = [0u32; N];
    let words = read_states(stream, base, &mut x)?;
    let words_at = base + N * RANS_STATE_BYTES;
    let mask = (1u32 << prob_bits) - 1;
    let mut pos = 0usize;
    // `table` has exactly 2^prob_bits entries (the frequencies sum to it), so
    // `slot & mask` always indexes it.
    let mut chunks = out.chunks_exact_mut(N);
    for chunk in &mut chunks {
        for (o, s) in chunk.iter_mut().zip(x.iter_mut()) {
            *o = step(s, table, mask, prob_bits, words, &mut pos)
                .ok_or_else(|| truncated(words_at, pos, present))?;
        }
    }
    for (o, s) in chunks.into_remainder().iter_mut().zip(x.iter_mut()) {
        *o = step(s, table, mask, prob_bits, words, &mut pos)
            .ok_or_else(|| truncated(words_at, pos, present))?;
    }
    finish(&x, base, pos, words.len(), present)
}

/// Decode one symbol of a lane and renormalize it; `None` when the renormalization needs
/// a word past the end of `words`.
#[inline(always)]
pub(crate) fn step(
    s: &mut u32,
    table: &[DecEntry],
    mask: u32,
    prob_bits: u8,
    words: &[u8],
    pos: &mut usize,
) -> Option<u8> {
    let e = table[(*s & mask) as usize];
    let (freq, bias) = ((e >> 20) + 1, (e >> 8) & 0xFFF);
    *s = freq * (*s >> prob_bits) + bias;
    if *s < RANS_L {
        let w = words.get(*pos..*pos + RANS_WORD_BYTES)?;
        *s = (*s << RANS_WORD_BITS) | u32::from(u16::from_le_bytes([w[0], w[1]]));
        *pos += RANS_WORD_BYTES;
    }
    Some(e as u8)
}

/// A static rANS table over an alphabet of up to 2^12 symbols (TQTC v7's model tables,
/// `docs/formats/quant.md` §14.3): the frequencies, their cumulative sums, the decoder's
/// slot-to-symbol map (`2^prob_bits` entries) and, built on first use, the encoder's
/// per-symbol constants.
#[derive(Debug)]
pub(crate) struct WideTable {
    prob_bits: u8,
    freqs: Box<[u16]>,
    cum: Box<[u32]>,
    /// Per symbol, `cum | freq << 16` (one load in the decoder: both are below 2^15).
    fc: Box<[u32]>,
    slots: Box<[u16]>,
    enc: std::sync::OnceLock<Box<[EncSym]>>,
}

impl std::fmt::Debug for EncSym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncSym")
            .field("freq", &self.freq)
            .field("cum", &self.cum)
            .finish()
    }
}

/// Largest alphabet of a [`WideTable`].
const WIDE_MAX_SYMBOLS: usize = 1 << 12;
/// Largest precision of a [`WideTable`]: `f * (x >> p) + bias < 2^32` needs `f <= 2^p`
/// and `p >= 1`, and the encoder's flush bound `(RANS_L >> p) << 16` needs `p <= 16`.
const WIDE_MAX_PROB_BITS: u8 = 15;

impl WideTable {
    /// The table of `freqs`; `None` unless there are 2..=4096 of them, each >= 1, summing
    /// to exactly `2^prob_bits` with `prob_bits` in 1..=15.
    pub(crate) fn new(freqs: Vec<u16>, prob_bits: u8) -> Option<Self> {
        if !(1..=WIDE_MAX_PROB_BITS).contains(&prob_bits)
            || !(2..=WIDE_MAX_SYMBOLS).contains(&freqs.len())
            || freqs.contains(&0)
        {
            return None;
        }
        let total: u32 = freqs.iter().map(|&f| u32::from(f)).sum();
        if total != 1u32 << prob_bits {
            return None;
        }
        let cum = cumulative(&freqs).into_boxed_slice();
        let fc = freqs
            .iter()
            .zip(cum.iter())
            .map(|(&f, &c)| c | u32::from(f) << 16)
            .collect();
        let mut slots = Vec::with_capacity(total as usize);
        for (sym, &f) in freqs.iter().enumerate() {
            // sym < 4096 fits u16.
            slots.extend(std::iter::repeat_n(sym as u16, usize::from(f)));
        }
        Some(Self {
            prob_bits,
            freqs: freqs.into_boxed_slice(),
            cum,
            fc,
            slots: slots.into_boxed_slice(),
            enc: std::sync::OnceLock::new(),
        })
    }

    /// The frequencies, one per symbol.
    pub(crate) fn freqs(&self) -> &[u16] {
        &self.freqs
    }

    fn enc(&self) -> &[EncSym] {
        self.enc.get_or_init(|| {
            let pb = u32::from(self.prob_bits);
            self.freqs
                .iter()
                .zip(self.cum.iter())
                .map(|(&f, &c)| {
                    let f = u32::from(f);
                    EncSym {
                        x_max: (u64::from(RANS_L >> pb) << RANS_WORD_BITS) * u64::from(f),
                        rcp: reciprocal(f),
                        freq: f,
                        cum: c,
                    }
                })
                .collect()
        })
    }
}

/// Append the stream for `codes` to `out`, symbol `i` coded with `tables[i / block]` on
/// lane `i % 2^lanes_log2` (the layout of [`encode`]: lane states, then the words in the
/// order the decoder reads them). Every code must be below its table's alphabet size and
/// `tables` must cover every block (the caller's invariant; a code past the alphabet
/// panics on the index rather than writing a wrong stream).
pub(crate) fn encode_wide(
    codes: &[u16],
    block: usize,
    tables: &[&WideTable],
    lanes_log2: u8,
    out: &mut Vec<u8>,
) {
    let lanes = 1usize << lanes_log2.min(3);
    let mut x = [RANS_L; 8];
    let mut words: Vec<u16> = Vec::with_capacity(codes.len() + 2 * lanes);
    for (bi, run) in codes.chunks(block.max(1)).enumerate().rev() {
        let t = tables[bi];
        let (enc, pb) = (t.enc(), u32::from(t.prob_bits));
        let start = bi * block.max(1);
        for (i, &c) in run.iter().enumerate().rev() {
            put(
                &mut x[(start + i) & (lanes - 1)],
                &enc[usize::from(c)],
                pb,
                &mut words,
            );
        }
    }
    for &s in x[..lanes].iter().rev() {
        words.push((s >> RANS_WORD_BITS) as u16);
        words.push(s as u16);
    }
    let start = out.len();
    out.resize(start + words.len() * RANS_WORD_BYTES, 0);
    for (d, w) in out[start..]
        .chunks_exact_mut(RANS_WORD_BYTES)
        .zip(words.iter().rev())
    {
        d.copy_from_slice(&w.to_le_bytes());
    }
}

/// Decoder of a stream written by [`encode_wide`]: [`WideDecoder::decode`] one block of
/// symbols at a time, each with its table, then [`WideDecoder::finish`].
pub(crate) struct WideDecoder<'a> {
    words: &'a [u8],
    /// Segment offset of the first word (after the lane states).
    words_at: usize,
    /// Segment offset of the stream (the lane states).
    base: usize,
    present: usize,
    pos: usize,
    x: [u32; 8],
    lanes: usize,
    lane: usize,
}

impl<'a> WideDecoder<'a> {
    /// Read the lane states at the start of `stream` (which starts at segment offset
    /// `base`).
    ///
    /// # Errors
    /// [`QuantError::CorruptField`] `rans stream` (odd length), `rans state` (a state
    /// below 2^16); [`QuantError::Truncated`] `rans states`.
    pub(crate) fn new(stream: &'a [u8], base: usize, lanes_log2: u8) -> Result<Self, QuantError> {
        let present = base + stream.len();
        if !stream.len().is_multiple_of(RANS_WORD_BYTES) {
            return Err(corrupt(
                "rans stream",
                base,
                stream.len() as u64,
                "its length must be a whole number of 16-bit words",
            ));
        }
        let lanes = 1usize << lanes_log2.min(3);
        let states_len = lanes * RANS_STATE_BYTES;
        let Some(states) = stream.get(..states_len) else {
            return Err(QuantError::Truncated {
                what: "rans states",
                offset: base as u64,
                end: (base + states_len) as u64,
                present,
            });
        };
        let mut x = [RANS_L; 8];
        for (j, (s, b)) in x
            .iter_mut()
            .zip(states.chunks_exact(RANS_STATE_BYTES))
            .enumerate()
        {
            *s = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if *s < RANS_L {
                return Err(corrupt(
                    "rans state",
                    base + j * RANS_STATE_BYTES,
                    (*s).into(),
                    "a lane's initial state must be >= 2^16",
                ));
            }
        }
        Ok(Self {
            words: &stream[states_len..],
            words_at: base + states_len,
            base,
            present,
            pos: 0,
            x,
            lanes,
            lane: 0,
        })
    }

    /// Decode `out.len()` symbols with table `t`.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] `rans stream` when a renormalization needs a word past
    /// the end.
    pub(crate) fn decode(&mut self, t: &WideTable, out: &mut [u16]) -> Result<(), QuantError> {
        match self.lanes {
            1 => self.decode_n::<1>(t, out),
            2 => self.decode_n::<2>(t, out),
            4 => self.decode_n::<4>(t, out),
            _ => self.decode_n::<8>(t, out),
        }
    }

    /// [`WideDecoder::decode`] with the lanes' states in locals (`N` is `self.lanes`).
    fn decode_n<const N: usize>(
        &mut self,
        t: &WideTable,
        out: &mut [u16],
    ) -> Result<(), QuantError> {
        let pb = u32::from(t.prob_bits);
        let mask = (1u32 << pb) - 1;
        let (slots, fc) = (&*t.slots, &*t.fc);
        let mut x = [0u32; N];
        x.copy_from_slice(&self.x[..N]);
        let words = self.words;
        let mut pos = self.pos;
        let first = self.lane;
        let mut result = Ok(());
        for (i, o) in out.iter_mut().enumerate() {
            let s = &mut x[(first + i) & (N - 1)];
            // `slots` has exactly 2^pb entries (WideTable::new checked the sum), so the
            // masked state indexes it; every slot's symbol indexes `fc`, and the slot is
            // at least its symbol's cumulative frequency.
            let slot = *s & mask;
            let sym = slots[slot as usize];
            let e = fc[usize::from(sym)];
            *s = (e >> 16) * (*s >> pb) + slot - (e & 0xFFFF);
            if *s < RANS_L {
                let Some(w) = words.get(pos..pos + RANS_WORD_BYTES) else {
                    result = Err(QuantError::Truncated {
                        what: "rans stream",
                        offset: (self.words_at + pos) as u64,
                        end: (self.words_at + pos + RANS_WORD_BYTES) as u64,
                        present: self.present,
                    });
                    break;
                };
                *s = (*s << RANS_WORD_BITS) | u32::from(u16::from_le_bytes([w[0], w[1]]));
                pos += RANS_WORD_BYTES;
            }
            *o = sym;
        }
        self.x[..N].copy_from_slice(&x);
        self.pos = pos;
        self.lane = (first + out.len()) & (N - 1);
        result
    }

    /// Check the stream is used up and every lane is back at its start state.
    ///
    /// # Errors
    /// [`QuantError::TrailingBytes`]; [`QuantError::CorruptField`] `rans final state`.
    pub(crate) fn finish(self) -> Result<(), QuantError> {
        if self.pos != self.words.len() {
            return Err(QuantError::TrailingBytes {
                expected: (self.words_at + self.pos) as u64,
                present: self.present,
            });
        }
        if let Some(j) = self.x[..self.lanes].iter().position(|&s| s != RANS_L) {
            return Err(corrupt(
                "rans final state",
                self.base + j * RANS_STATE_BYTES,
                self.x[j].into(),
                "decoding every symbol must bring each lane back to 2^16",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reciprocal_division_is_exact_at_the_edges() {
        let xs = [
            0u32,
            1,
            2,
            3,
            4095,
            4096,
            65535,
            65536,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
        ];
        for f in (1u32..=4096).chain([65535, 65536, u32::MAX]) {
            let m = reciprocal(f);
            for &x in &xs {
                assert_eq!(div_by(x, f, m), x / f, "{x} / {f}");
            }
            // The largest multiple of f and its neighbours.
            let top = u32::MAX / f * f;
            for x in [top, top.wrapping_sub(1), top.saturating_add(1)] {
                assert_eq!(div_by(x, f, m), x / f, "{x} / {f}");
            }
        }
    }
}
