// SPDX-License-Identifier: GPL-2.0

//! Network namespaces, held.
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)
//!
//! A [`NetNs`] is a counted reference on a `struct net`: while it lives the
//! namespace is not torn down, so sockets made in it and its netdevs stay
//! valid (a process's socket holds its namespace the same way). Interface
//! indexes and addresses only mean something inside one namespace, so
//! whatever names a netdev by index carries its namespace with it.

use core::ptr::NonNull;

mod ffi {
    use core::ffi::c_void;

    extern "C" {
        pub(super) fn rust_net_get(net: *mut c_void) -> *mut c_void;
        pub(super) fn rust_net_get_init() -> *mut c_void;
        pub(super) fn rust_net_put(net: *mut c_void);
    }
}

/// A counted reference on a network namespace.
///
/// # Invariants
///
/// `raw` is a `struct net` this value holds one reference on, given back
/// in `drop`.
pub struct NetNs {
    raw: NonNull<core::ffi::c_void>,
}

// SAFETY: A namespace reference may be taken and dropped on any thread.
unsafe impl Send for NetNs {}
// SAFETY: `&NetNs` only reads the pointer.
unsafe impl Sync for NetNs {}

impl NetNs {
    /// The initial namespace.
    pub fn init() -> Self {
        // SAFETY: The initial namespace always exists.
        let raw = unsafe { ffi::rust_net_get_init() };
        // INVARIANT: A reference was just taken.
        Self {
            // SAFETY: The helper returns `&init_net`, which is not NULL.
            raw: unsafe { NonNull::new_unchecked(raw) },
        }
    }

    /// A reference on `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is a live `struct net` for the duration of the call: its
    /// caller holds a reference on it, or on something that holds one (a
    /// netdev of it, under RTNL or a reference).
    pub unsafe fn from_borrowed(raw: *mut core::ffi::c_void) -> Option<Self> {
        let raw = NonNull::new(raw)?;
        // SAFETY: Per the function's contract.
        unsafe { ffi::rust_net_get(raw.as_ptr()) };
        // INVARIANT: The reference was just taken.
        Some(Self { raw })
    }

    /// The `struct net`, for C calls made while this reference lives.
    pub fn as_raw(&self) -> *mut core::ffi::c_void {
        self.raw.as_ptr()
    }

    /// Whether `self` and `other` are the same namespace.
    pub fn same(&self, other: &NetNs) -> bool {
        self.raw == other.raw
    }
}

impl Clone for NetNs {
    fn clone(&self) -> Self {
        // SAFETY: `self` holds a reference, so the namespace is live.
        unsafe { ffi::rust_net_get(self.raw.as_ptr()) };
        // INVARIANT: The reference was just taken.
        Self { raw: self.raw }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // SAFETY: The reference this value holds (type invariant), given
        // back once.
        unsafe { ffi::rust_net_put(self.raw.as_ptr()) };
    }
}
