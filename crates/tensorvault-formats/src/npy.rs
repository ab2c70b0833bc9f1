//! A strict, bounded parser for the `.npy` preamble and header dictionary.
//!
//! Format (numpy's `format.py`): the magic `\x93NUMPY` (offset 0), major and minor
//! version bytes (offsets 6, 7), the header length (offset 8: u16 LE in version 1, u32 LE
//! in versions 2 and 3), then that many bytes of a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` padded with spaces and a
//! newline. Everything a file says is checked before it is trusted: the header length
//! against [`MAX_HEADER_LEN`] and the file's real length (a length of 0xFFFFFFF0 in a
//! 20-byte file is refused before anything is allocated), and the dictionary by a
//! single-pass parser that takes exactly the three keys numpy writes (a general Python
//! literal parser spent minutes on 54 `{` bytes).

use crate::FormatError;

/// Format name in errors.
const FORMAT: &str = "npy";
/// Largest header accepted, in bytes. numpy refuses headers over 10,000 bytes unless told
/// otherwise (`max_header_size`); real headers are under 200.
pub const MAX_HEADER_LEN: u64 = 64 << 10;
/// Bytes of a file [`parse_header`] may need: the longest preamble plus the largest header.
pub const MAX_PREFIX_LEN: u64 = 12 + MAX_HEADER_LEN;
/// Most dimensions accepted (numpy's own limit is 64).
pub const MAX_NDIM: usize = 64;
/// Offset of the header length field.
const HEADER_LEN_OFFSET: u64 = 8;

/// What an `.npy` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// numpy's dtype string, e.g. `<f4`.
    pub descr: String,
    /// Column-major data.
    pub fortran_order: bool,
    /// The array's shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Offset of the first data byte.
    pub data_offset: u64,
}

fn invalid(field: &str, offset: u64, reason: String) -> FormatError {
    FormatError::InvalidField {
        format: FORMAT,
        field: field.to_owned(),
        offset,
        reason,
    }
}

/// Parses the preamble and header of an `.npy` file of `file_len` bytes whose first bytes
/// are `prefix` (at least `min(file_len, MAX_PREFIX_LEN)` of them).
///
/// # Errors
/// [`FormatError::InvalidField`] naming the field (`magic`, `version`, `header_len`,
/// `header`) and its offset.
pub fn parse_header(prefix: &[u8], file_len: u64) -> Result<NpyHeader, FormatError> {
    let pre = &prefix[..prefix.len().min(12)];
    if pre.len() < 6 || &pre[..6] != b"\x93NUMPY" {
        return Err(invalid(
            "magic",
            0,
            format!("not a valid .npy file (no \\x93NUMPY magic; file has {file_len} bytes)"),
        ));
    }
    let got = pre.len();
    let (header_len, preamble) = match (pre.get(6).copied().unwrap_or(0), got) {
        (1, 10..) => (u64::from(u16::from_le_bytes([pre[8], pre[9]])), 10u64),
        (2 | 3, 12) => (
            u64::from(u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]])),
            12u64,
        ),
        (1..=3, _) => {
            return Err(invalid(
                "header_len",
                HEADER_LEN_OFFSET,
                format!("truncated (file has {file_len} bytes)"),
            ))
        }
        (v, _) => {
            return Err(invalid(
                "version",
                6,
                format!("major version {v} is not 1, 2 or 3"),
            ))
        }
    };
    let room = file_len.saturating_sub(preamble);
    let end = preamble + header_len;
    if header_len > MAX_HEADER_LEN || header_len > room || end > prefix.len() as u64 {
        return Err(invalid(
            "header_len",
            HEADER_LEN_OFFSET,
            format!(
                "{header_len} bytes (at most {MAX_HEADER_LEN}, and the file has {room} bytes \
                 after offset {preamble})"
            ),
        ));
    }
    let text = &prefix[preamble as usize..end as usize];
    let (descr, fortran_order, shape) =
        parse_dict(text).map_err(|(at, what)| invalid("header", preamble + at as u64, what))?;
    Ok(NpyHeader {
        descr,
        fortran_order,
        shape,
        data_offset: end,
    })
}

/// A parse failure: offset within the dictionary text and what was wrong there.
type ParseErr = (usize, String);

/// A cursor over the dictionary text.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        while self.at < self.b.len() && matches!(self.b[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }
    fn fail<T>(&self, what: impl Into<String>) -> Result<T, ParseErr> {
        Err((self.at, what.into()))
    }
    fn expect(&mut self, c: u8) -> Result<(), ParseErr> {
        self.ws();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(format!("expected '{}'", c as char))
        }
    }
    /// A quoted string without escapes (numpy never writes any in these three values).
    fn string(&mut self) -> Result<String, ParseErr> {
        self.ws();
        let Some(q @ (b'\'' | b'"')) = self.peek() else {
            return self.fail("expected a quoted string");
        };
        let start = self.at + 1;
        let Some(len) = self.b[start..].iter().position(|&c| c == q) else {
            return self.fail("unterminated string");
        };
        let s = &self.b[start..start + len];
        if s.len() > 64 || !s.iter().all(|c| c.is_ascii_graphic() && *c != b'\\') {
            return self.fail("string is not a short printable name");
        }
        self.at = start + len + 1;
        Ok(String::from_utf8_lossy(s).into_owned())
    }
    fn word(&mut self, w: &str) -> bool {
        if self.b[self.at..].starts_with(w.as_bytes()) {
            self.at += w.len();
            true
        } else {
            false
        }
    }
    fn boolean(&mut self) -> Result<bool, ParseErr> {
        self.ws();
        if self.word("True") {
            Ok(true)
        } else if self.word("False") {
            Ok(false)
        } else {
            self.fail("expected True or False")
        }
    }
    fn uint(&mut self) -> Result<u64, ParseErr> {
        self.ws();
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        // The slice is ASCII digits only.
        let digits = std::str::from_utf8(&self.b[start..self.at]).unwrap_or_default();
        digits.parse::<u64>().or_else(|_| {
            self.at = start;
            self.fail("expected a dimension (an integer below 2^64)")
        })
    }
    /// `(d0, d1, ...)` with an optional trailing comma; `()` is a scalar.
    fn shape(&mut self) -> Result<Vec<u64>, ParseErr> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.ws();
            if self.peek() == Some(b')') {
                self.at += 1;
                return Ok(dims);
            }
            if dims.len() == MAX_NDIM {
                return self.fail(format!("more than {MAX_NDIM} dimensions"));
            }
            dims.push(self.uint()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b')') => {}
                _ => return self.fail("expected ',' or ')' in shape"),
            }
        }
    }
}

/// Parses the header dictionary: exactly the keys `descr`, `fortran_order` and `shape`,
/// each once, then only padding.
fn parse_dict(b: &[u8]) -> Result<(String, bool, Vec<u64>), ParseErr> {
    let mut c = Cursor { b, at: 0 };
    c.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        c.ws();
        if c.peek() == Some(b'}') {
            c.at += 1;
            break;
        }
        let key_at = c.at;
        let key = c.string()?;
        c.expect(b':')?;
        let dup = match key.as_str() {
            "descr" => descr.replace(c.string()?).is_some(),
            "fortran_order" => fortran.replace(c.boolean()?).is_some(),
            "shape" => shape.replace(c.shape()?).is_some(),
            other => return Err((key_at, format!("unknown key {other:?}"))),
        };
        if dup {
            return Err((key_at, format!("key {key:?} appears twice")));
        }
        c.ws();
        match c.peek() {
            Some(b',') => c.at += 1,
            Some(b'}') => {}
            _ => return c.fail("expected ',' or '}'"),
        }
    }
    c.ws();
    if c.at != b.len() {
        return c.fail("bytes after the header dictionary");
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        (None, ..) => Err((0, "missing key 'descr'".into())),
        (_, None, _) => Err((0, "missing key 'fortran_order'".into())),
        (.., None) => Err((0, "missing key 'shape'".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_dict;

    #[test]
    fn parses_what_numpy_writes() {
        let h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }          \n";
        assert_eq!(parse_dict(h).unwrap(), ("<f4".into(), false, vec![3, 4]));
        let h = b"{'descr': '|u1', 'fortran_order': True, 'shape': (7,), }\n";
        assert_eq!(parse_dict(h).unwrap(), ("|u1".into(), true, vec![7]));
        let h = b"{\"shape\": (), \"descr\": \"<f8\", \"fortran_order\": False}";
        assert_eq!(parse_dict(h).unwrap(), ("<f8".into(), false, vec![]));
    }

    #[test]
    fn refuses_with_the_offset() {
        for (h, at) in [
            (
                &b"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"[..],
                1,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'x': 1}",
                58,
            ),
            (
                b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
                17,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                51,
            ),
            (b"{'descr': '<f4', 'fortran_order': False}", 0),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
                56,
            ),
        ] {
            let e = parse_dict(h).unwrap_err();
            assert_eq!(e.0, at, "{}: {}", String::from_utf8_lossy(h), e.1);
        }
    }
}
