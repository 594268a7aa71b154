//! Procedure arguments and replies: fixed-width little-endian fields, read back with checks.
//!
//! Arguments come from outside (clients, later over the network), so a reader never panics:
//! a short or overlong argument string is a [`ProcError::BadArgs`].

use crate::ProcError;

/// Appends fixed-width little-endian fields to an argument or reply buffer.
#[derive(Debug)]
pub struct ArgWriter<'b>(pub &'b mut Vec<u8>);

impl ArgWriter<'_> {
    #[inline]
    pub fn u32(&mut self, value: u32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    #[inline]
    pub fn i32(&mut self, value: i32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    #[inline]
    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    #[inline]
    pub fn i64(&mut self, value: i64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
}

/// Reads fixed-width little-endian fields in order.
#[derive(Debug)]
pub struct ArgReader<'b> {
    bytes: &'b [u8],
}

impl<'b> ArgReader<'b> {
    pub fn new(bytes: &'b [u8]) -> ArgReader<'b> {
        ArgReader { bytes }
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ProcError> {
        let Some((head, rest)) = self.bytes.split_first_chunk::<N>() else {
            return Err(ProcError::BadArgs("argument string ends early"));
        };
        self.bytes = rest;
        Ok(*head)
    }

    #[inline]
    pub fn u32(&mut self) -> Result<u32, ProcError> {
        self.take().map(u32::from_le_bytes)
    }

    #[inline]
    pub fn i32(&mut self) -> Result<i32, ProcError> {
        self.take().map(i32::from_le_bytes)
    }

    #[inline]
    pub fn u64(&mut self) -> Result<u64, ProcError> {
        self.take().map(u64::from_le_bytes)
    }

    #[inline]
    pub fn i64(&mut self) -> Result<i64, ProcError> {
        self.take().map(i64::from_le_bytes)
    }

    /// Checks that every byte was read.
    #[inline]
    pub fn finish(self) -> Result<(), ProcError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(ProcError::BadArgs("argument string has trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_bad_lengths_are_errors() {
        let mut buffer = Vec::new();
        ArgWriter(&mut buffer).u32(7).i32(-3).u64(1 << 40).i64(-9);
        let mut reader = ArgReader::new(&buffer);
        assert_eq!(reader.u32(), Ok(7));
        assert_eq!(reader.i32(), Ok(-3));
        assert_eq!(reader.u64(), Ok(1 << 40));
        assert_eq!(reader.i64(), Ok(-9));
        assert_eq!(reader.finish(), Ok(()));

        let mut short = ArgReader::new(&buffer[..2]);
        assert_eq!(
            short.u32(),
            Err(ProcError::BadArgs("argument string ends early"))
        );
        let long = ArgReader::new(&buffer[..1]);
        assert_eq!(
            long.finish(),
            Err(ProcError::BadArgs("argument string has trailing bytes"))
        );
    }
}
