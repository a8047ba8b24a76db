//! A compact, versionless byte encoding for aggregate states.

use std::fmt;

/// Appends fields to a state buffer: varints for integers, little-endian
/// for floats, length-prefixed byte strings.
#[derive(Debug, Default)]
pub struct StateWriter {
    buf: Vec<u8>,
}

impl StateWriter {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an unsigned LEB128 varint.
    pub fn u64(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
        self
    }

    /// Appends a zigzag varint.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.u64(((v << 1) ^ (v >> 63)) as u64)
    }

    /// Appends 8 little-endian bytes.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
        self
    }

    /// The encoded state.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// The state bytes ended early, or held more than the reader consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError(&'static str);

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for StateError {}

impl From<StateError> for String {
    fn from(error: StateError) -> Self {
        error.to_string()
    }
}

/// Reads fields written by [`StateWriter`], in the same order.
#[derive(Debug)]
pub struct StateReader<'a> {
    rest: &'a [u8],
}

impl<'a> StateReader<'a> {
    /// Reads from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        StateReader { rest: bytes }
    }

    /// Reads an unsigned varint.
    pub fn u64(&mut self) -> Result<u64, StateError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or(StateError("state ends inside a varint"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(StateError("varint longer than 10 bytes"))
    }

    /// Reads a zigzag varint.
    pub fn i64(&mut self) -> Result<i64, StateError> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Reads 8 little-endian bytes.
    pub fn f64(&mut self) -> Result<f64, StateError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or(StateError("state ends inside a float"))?;
        self.rest = rest;
        Ok(f64::from_le_bytes(*head))
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], StateError> {
        let len = usize::try_from(self.u64()?).map_err(|_| StateError("length too large"))?;
        if len > self.rest.len() {
            return Err(StateError("state ends inside a byte string"));
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Checks that every byte was read.
    pub fn finish(self) -> Result<(), StateError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(StateError("trailing bytes after the state"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_field_kind() {
        let bytes = StateWriter::new()
            .u64(0)
            .u64(u64::MAX)
            .i64(i64::MIN)
            .i64(-1)
            .f64(-2.5)
            .bytes(b"abc")
            .finish();
        let mut r = StateReader::new(&bytes);
        assert_eq!(r.u64(), Ok(0));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.i64(), Ok(i64::MIN));
        assert_eq!(r.i64(), Ok(-1));
        assert_eq!(r.f64(), Ok(-2.5));
        assert_eq!(r.bytes(), Ok(&b"abc"[..]));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn truncated_state_is_an_error_not_a_panic() {
        let bytes = StateWriter::new().bytes(b"abcdef").f64(1.0).finish();
        for len in 0..bytes.len() {
            let mut r = StateReader::new(&bytes[..len]);
            let ok = r.bytes().is_ok() && r.f64().is_ok();
            assert!(!ok, "prefix of {len} bytes decoded");
        }
        assert!(StateReader::new(&[0xff; 11]).u64().is_err());
    }
}
