// SPDX-License-Identifier: GPL-2.0

//! Checked big-endian cursors over byte slices.
//!
//! Every header is read and written through these two types, so that the
//! bounds checks live in one place and no header code indexes a slice.

use super::WireError;

/// Reads big-endian fields from the front of a slice.
pub(super) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next `N` bytes, or [`WireError::Truncated`] if fewer are left.
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(WireError::Truncated)?;
        self.rest = rest;
        Ok(*head)
    }

    pub(super) fn u8(&mut self) -> Result<u8, WireError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    pub(super) fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(super) fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(super) fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// Writes big-endian fields at the front of a mutable slice.
pub(super) struct Writer<'a> {
    rest: &'a mut [u8],
}

impl<'a> Writer<'a> {
    pub(super) fn new(out: &'a mut [u8]) -> Self {
        Self { rest: out }
    }

    /// Writes `bytes`, or fails with [`WireError::NoRoom`] and writes
    /// nothing.
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        let rest = core::mem::take(&mut self.rest);
        if rest.len() < bytes.len() {
            self.rest = rest;
            return Err(WireError::NoRoom);
        }
        let (head, tail) = rest.split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = tail;
        Ok(())
    }

    pub(super) fn u8(&mut self, v: u8) -> Result<(), WireError> {
        self.put(&[v])
    }

    pub(super) fn u16(&mut self, v: u16) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }

    pub(super) fn u32(&mut self, v: u32) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }

    pub(super) fn u64(&mut self, v: u64) -> Result<(), WireError> {
        self.put(&v.to_be_bytes())
    }
}
