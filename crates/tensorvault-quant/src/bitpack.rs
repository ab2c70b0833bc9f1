//! LSB-first bit packing of k-bit codes (k = 2..=8) into a little-endian bit stream.
//!
//! Code `i` occupies stream bits `i*k .. (i+1)*k`, least significant bit first, and stream
//! bit `j` is bit `j % 8` of byte `j / 8`. `n` codes take `ceil(n*k/8)` bytes; the unused
//! high bits of the last byte are zero when written and ignored when read. Spec:
//! `docs/formats/quant.md`.
//!
//! Each width has a fast path that moves 8 codes through one `u64` (8 codes <-> `k`
//! bytes: for 3 bits, 8 codes -> 3 bytes), monomorphised per width so the shifts are
//! constants; a short tail goes through the same word with fewer bytes.
//!
//! ```
//! use tensorvault_quant::bitpack::{pack, packed_len, unpack};
//! let codes = [1u8, 2, 3, 4, 5, 6, 7, 0, 1, 2];
//! let mut packed = vec![0u8; packed_len(codes.len(), 3)];
//! pack(&codes, 3, &mut packed)?;
//! assert_eq!(packed.len(), 4);
//! let mut back = [0u8; 10];
//! unpack(&packed, 3, &mut back)?;
//! assert_eq!(back, codes);
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::error::check_len;
use crate::layout::{MAX_BITS, MIN_BITS};
use crate::QuantError;

/// Bytes needed for `n` codes of `bits` bits: `ceil(n * bits / 8)`.
///
/// Saturates instead of overflowing (only reachable for `n` near `usize::MAX`).
pub fn packed_len(n: usize, bits: u8) -> usize {
    n.saturating_mul(usize::from(bits)).div_ceil(8)
}

pub(crate) fn check_bits(bits: u8) -> Result<(), QuantError> {
    if (MIN_BITS..=MAX_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(QuantError::InvalidBits { bits })
    }
}

/// Pack `codes` (each `< 2^bits`) into `out`, which must hold exactly
/// [`packed_len`]`(codes.len(), bits)` bytes.
///
/// # Errors
/// [`QuantError::InvalidBits`] for `bits` outside 2..=8, [`QuantError::LengthMismatch`]
/// if `out` has the wrong length, [`QuantError::CodeOutOfRange`] naming the first code
/// that does not fit in `bits` bits.
pub fn pack(codes: &[u8], bits: u8, out: &mut [u8]) -> Result<(), QuantError> {
    check_bits(bits)?;
    check_len(
        "bit pack (packed bytes)",
        packed_len(codes.len(), bits),
        out.len(),
    )?;
    let limit = 1u16 << bits;
    // A branch-free max first (vectorises), the index only on failure.
    let max = codes.iter().fold(0u8, |m, &c| m.max(c));
    if u16::from(max) >= limit {
        let index = codes
            .iter()
            .position(|&c| u16::from(c) >= limit)
            .unwrap_or(0);
        return Err(QuantError::CodeOutOfRange {
            index,
            code: codes[index],
            bits,
        });
    }
    pack_unchecked(codes, bits, out);
    Ok(())
}

/// Unpack `out.len()` codes of `bits` bits from `packed`, which must hold exactly
/// [`packed_len`]`(out.len(), bits)` bytes.
///
/// # Errors
/// [`QuantError::InvalidBits`] for `bits` outside 2..=8, [`QuantError::LengthMismatch`]
/// if `packed` has the wrong length.
pub fn unpack(packed: &[u8], bits: u8, out: &mut [u8]) -> Result<(), QuantError> {
    check_bits(bits)?;
    check_len(
        "bit unpack (packed bytes)",
        packed_len(out.len(), bits),
        packed.len(),
    )?;
    unpack_unchecked(packed, bits, out);
    Ok(())
}

/// Pack with lengths and code ranges already guaranteed by the caller: `bits` in 2..=8,
/// `out.len() == packed_len(codes.len(), bits)`, every code `< 2^bits` (a larger code
/// only corrupts its neighbours' bits, never memory).
pub(crate) fn pack_unchecked(codes: &[u8], bits: u8, out: &mut [u8]) {
    match bits {
        2 => pack_w::<2>(codes, out),
        3 => pack_w::<3>(codes, out),
        4 => pack_w::<4>(codes, out),
        5 => pack_w::<5>(codes, out),
        6 => pack_w::<6>(codes, out),
        7 => pack_w::<7>(codes, out),
        _ => out.copy_from_slice(codes),
    }
}

/// Unpack with `bits` in 2..=8 and `packed.len() == packed_len(out.len(), bits)`.
pub(crate) fn unpack_unchecked(packed: &[u8], bits: u8, out: &mut [u8]) {
    match bits {
        2 => unpack_w::<2>(packed, out),
        3 => unpack_w::<3>(packed, out),
        4 => unpack_w::<4>(packed, out),
        5 => unpack_w::<5>(packed, out),
        6 => unpack_w::<6>(packed, out),
        7 => unpack_w::<7>(packed, out),
        _ => out.copy_from_slice(packed),
    }
}

#[inline(always)]
fn word_of<const B: usize>(codes: &[u8]) -> u64 {
    let mut w = 0u64;
    for (j, &c) in codes.iter().enumerate() {
        w |= u64::from(c) << (j * B);
    }
    w
}

fn pack_w<const B: usize>(codes: &[u8], out: &mut [u8]) {
    let full = codes.len() / 8;
    let (head_c, tail_c) = codes.split_at(full * 8);
    let (head_o, tail_o) = out.split_at_mut(full * B);
    for (c, o) in head_c.chunks_exact(8).zip(head_o.chunks_exact_mut(B)) {
        o.copy_from_slice(&word_of::<B>(c).to_le_bytes()[..B]);
    }
    if !tail_c.is_empty() {
        let n = tail_o.len();
        tail_o.copy_from_slice(&word_of::<B>(tail_c).to_le_bytes()[..n]);
    }
}

#[inline(always)]
fn codes_of<const B: usize>(w: u64, out: &mut [u8]) {
    let mask = (1u64 << B) - 1;
    for (j, o) in out.iter_mut().enumerate() {
        *o = ((w >> (j * B)) & mask) as u8;
    }
}

fn unpack_w<const B: usize>(packed: &[u8], out: &mut [u8]) {
    let full = out.len() / 8;
    let (head_p, tail_p) = packed.split_at(full * B);
    let (head_o, tail_o) = out.split_at_mut(full * 8);
    for (p, o) in head_p.chunks_exact(B).zip(head_o.chunks_exact_mut(8)) {
        let mut b = [0u8; 8];
        b[..B].copy_from_slice(p);
        codes_of::<B>(u64::from_le_bytes(b), o);
    }
    if !tail_o.is_empty() {
        let mut b = [0u8; 8];
        b[..tail_p.len()].copy_from_slice(tail_p);
        codes_of::<B>(u64::from_le_bytes(b), tail_o);
    }
}

/// Bit-at-a-time reference of the stream layout, for tests of the fast paths.
#[cfg(test)]
pub(crate) fn pack_reference(codes: &[u8], bits: u8) -> Vec<u8> {
    let mut out = vec![0u8; packed_len(codes.len(), bits)];
    for (i, &c) in codes.iter().enumerate() {
        for k in 0..usize::from(bits) {
            let bit = i * usize::from(bits) + k;
            out[bit / 8] |= ((c >> k) & 1) << (bit % 8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn three_bits_is_eight_codes_per_three_bytes() {
        let codes = [7u8, 0, 7, 0, 7, 0, 7, 0];
        let mut out = [0u8; 3];
        pack(&codes, 3, &mut out).unwrap();
        assert_eq!(out.to_vec(), pack_reference(&codes, 3));
        // code 0 = bits 0..3 = 0b111, code 2 = bits 6..9.
        assert_eq!(out[0], 0b1100_0111);
    }

    #[test]
    fn bad_bits_lengths_and_codes_are_typed_errors() {
        let mut out = [0u8; 4];
        assert_eq!(
            pack(&[0; 8], 1, &mut out),
            Err(QuantError::InvalidBits { bits: 1 })
        );
        assert_eq!(
            pack(&[0; 8], 9, &mut out),
            Err(QuantError::InvalidBits { bits: 9 })
        );
        assert!(matches!(
            pack(&[0; 8], 3, &mut out),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert_eq!(
            pack(&[0, 1, 8, 0, 0, 0, 0, 0, 0, 0], 3, &mut out),
            Err(QuantError::CodeOutOfRange {
                index: 2,
                code: 8,
                bits: 3
            })
        );
        let mut codes = [0u8; 5];
        assert!(matches!(
            unpack(&[0; 4], 4, &mut codes),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert_eq!(
            unpack(&[0; 3], 0, &mut codes),
            Err(QuantError::InvalidBits { bits: 0 })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn round_trip_every_width_and_length(bits in 2u8..=8, len in 0usize..300, seed in any::<u64>()) {
            let mut s = seed | 1;
            let codes: Vec<u8> = (0..len).map(|_| {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                (s as u8) & ((1u16 << bits) - 1) as u8
            }).collect();
            let mut packed = vec![0u8; packed_len(len, bits)];
            pack(&codes, bits, &mut packed).unwrap();
            prop_assert_eq!(&packed, &pack_reference(&codes, bits));
            let mut back = vec![0u8; len];
            unpack(&packed, bits, &mut back).unwrap();
            prop_assert_eq!(back, codes);
        }

        #[test]
        fn unpack_then_pack_is_identity(bits in 2u8..=8, len in 0usize..200, bytes in proptest::collection::vec(any::<u8>(), 200)) {
            let n = packed_len(len, bits);
            let mut packed = bytes[..n].to_vec();
            // Padding bits of the last byte are not part of any code: clear them.
            let used = len * usize::from(bits) % 8;
            if used != 0 {
                packed[n - 1] &= (1u8 << used) - 1;
            }
            let mut codes = vec![0u8; len];
            unpack(&packed, bits, &mut codes).unwrap();
            let mut again = vec![0u8; n];
            pack(&codes, bits, &mut again).unwrap();
            prop_assert_eq!(again, packed);
        }
    }
}
