// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's generator (`get_random_u32`), which
//! the kernel's Rust crate does not wrap in 7.3.

/// A random `u32`, as unpredictable as `get_random_u32()` makes it.
pub(crate) fn random_u32() -> u32 {
    // SAFETY: `get_random_u32` may be called from any context and has no
    // precondition.
    unsafe { kernel::bindings::get_random_u32() }
}
