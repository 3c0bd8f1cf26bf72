// SPDX-License-Identifier: GPL-2.0

//! Capabilities of the credentials a file was opened with.
//!
//! The C side is `rust/helpers/capability.c`. A check made against the
//! opener's credentials (as `file_ns_capable` does), not the current
//! task's, cannot be passed on by handing the descriptor to another
//! process.

use kernel::fs::File;

mod ffi {
    use core::ffi::{c_int, c_void};

    extern "C" {
        pub(super) fn rust_file_capable(file: *const c_void, cap: c_int) -> bool;
    }
}

/// The capabilities this module checks (`include/uapi/linux/capability.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Capability {
    /// `CAP_SYS_RAWIO`: raw access to devices and their I/O.
    SysRawio = 17,
}

/// Whether `file` was opened by a task holding `cap` in the initial user
/// namespace.
pub fn file_capable(file: &File, cap: Capability) -> bool {
    // SAFETY: `file.as_ptr()` is a valid `struct file` for the duration
    // of the call (`file` is borrowed); the helper only reads the
    // credentials it was opened with.
    unsafe { ffi::rust_file_capable(file.as_ptr().cast(), cap as i32) }
}
