// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The fuzz input read as a little program: fields are taken from the
//! front, and a field past the end reads as zeros, so every input is a
//! valid program and libFuzzer's mutations stay meaningful.

/// The unread rest of the input.
pub struct Input<'a>(pub &'a [u8]);

#[allow(dead_code, reason = "each target uses the widths it needs")]
impl Input<'_> {
    /// True once everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | (u16::from(self.u8()) << 8)
    }
    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
}
