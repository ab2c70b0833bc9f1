//! A bounds-checked little-endian cursor over one section of a MOBI file, with the v2
//! LEB128 varints. Every read is checked against the section's end; nothing is
//! allocated from a length before the bytes for it are known to be present.

use super::error::MobiError;
use super::layout::{V2_MAX_NAME_BYTES, VARINT_MAX_BYTES};

/// A bounds-checked little-endian cursor over one section `[pos, end)` of the file.
pub(crate) struct Cur<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) end: usize,
}

impl<'a> Cur<'a> {
    pub(crate) fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.pos) as u64
    }

    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], MobiError> {
        let avail = self.remaining();
        if n > avail {
            return Err(MobiError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                available: avail,
            });
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], MobiError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, MobiError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, MobiError> {
        self.array(what).map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, MobiError> {
        self.array(what).map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, MobiError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count checked against how many `min_size`-byte items could fit.
    pub(crate) fn count(
        &mut self,
        count: u64,
        min_size: u64,
        field: &'static str,
    ) -> Result<usize, MobiError> {
        let max = self.remaining() / min_size;
        if count > max {
            return Err(MobiError::CountTooLarge {
                field,
                count,
                offset: self.pos as u64,
                max,
            });
        }
        Ok(count as usize)
    }

    pub(crate) fn string(
        &mut self,
        len: u64,
        field: &'static str,
        p: &mut Vec<MobiError>,
    ) -> Result<String, MobiError> {
        let at = self.pos as u64;
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => {
                p.push(MobiError::InvalidUtf8 { field, offset: at });
                Ok(String::from_utf8_lossy(bytes).into_owned())
            }
        }
    }

    /// An unsigned LEB128 varint: at most 10 bytes, no bits beyond u64, no redundant
    /// trailing zero group (one encoding per value, so re-encoding is byte-exact).
    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u64, MobiError> {
        let at = self.pos as u64;
        let mut v = 0u64;
        for i in 0..VARINT_MAX_BYTES {
            let byte = self.u8(field)?;
            let bits = u64::from(byte & 0x7f);
            if i == VARINT_MAX_BYTES - 1 && bits > 1 {
                return Err(MobiError::InvalidVarint { field, offset: at });
            }
            v |= bits << (7 * i);
            if byte & 0x80 == 0 {
                if i > 0 && bits == 0 {
                    return Err(MobiError::InvalidVarint { field, offset: at });
                }
                return Ok(v);
            }
        }
        Err(MobiError::InvalidVarint { field, offset: at })
    }

    /// A varint that must be at most `max` (a u16/u32 field, a bounded count).
    pub(crate) fn varint_max(&mut self, field: &'static str, max: u64) -> Result<u64, MobiError> {
        let at = self.pos as u64;
        let v = self.varint(field)?;
        if v > max {
            return Err(MobiError::ValueOutOfRange {
                field,
                value: v,
                offset: at,
                max,
            });
        }
        Ok(v)
    }

    /// A varint that must fit in u32.
    pub(crate) fn varint32(&mut self, field: &'static str) -> Result<u32, MobiError> {
        self.varint_max(field, u64::from(u32::MAX))
            .map(|v| v as u32)
    }

    /// A zigzag-encoded signed varint.
    pub(crate) fn zigzag(&mut self, field: &'static str) -> Result<i64, MobiError> {
        let v = self.varint(field)?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A varint count checked against how many `min_size`-byte items could fit.
    pub(crate) fn varint_count(
        &mut self,
        min_size: u64,
        field: &'static str,
    ) -> Result<usize, MobiError> {
        let v = self.varint(field)?;
        self.count(v, min_size, field)
    }

    /// A v2 name: varint length (at most [`V2_MAX_NAME_BYTES`]) + UTF-8 bytes.
    pub(crate) fn name(
        &mut self,
        len_field: &'static str,
        field: &'static str,
        p: &mut Vec<MobiError>,
    ) -> Result<String, MobiError> {
        let at = self.pos as u64;
        let len = self.varint(len_field)?;
        self.name_of_len(len, at, field, p)
    }

    /// The bytes of a v2 name whose length was already read at `at`.
    pub(crate) fn name_of_len(
        &mut self,
        len: u64,
        at: u64,
        field: &'static str,
        p: &mut Vec<MobiError>,
    ) -> Result<String, MobiError> {
        if len > V2_MAX_NAME_BYTES {
            return Err(MobiError::NameTooLong {
                field,
                len,
                offset: at,
                max: V2_MAX_NAME_BYTES,
            });
        }
        self.string(len, field, p)
    }
}
