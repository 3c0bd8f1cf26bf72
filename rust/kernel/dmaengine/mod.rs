// SPDX-License-Identifier: GPL-2.0

//! DMA engine (`dmaengine`) abstractions.
//!
//! C header: [`include/linux/dmaengine.h`](srctree/include/linux/dmaengine.h)
//!
//! The dmaengine core connects *clients* that want memory moved (dmatest, the
//! async_tx API, network and storage stacks) with *providers*: drivers of
//! engines that move it. This module offers both sides:
//!
//! - [`provider`]: a driver implements [`provider::ChannelOps`] for its
//!   channel type and hands its channels to a [`provider::Registration`];
//!   the abstraction owns the C `struct dma_device`, its channels and the
//!   transaction descriptors, and forwards each dmaengine callback.
//! - [`client`]: request a memcpy-capable channel, prepare, submit and wait.
//!
//! The kernel's Rust bindings do not cover `<linux/dmaengine.h>` and the
//! cookie helpers are static inlines of the private `drivers/dma/dmaengine.h`,
//! so the C structures live behind a thin helper file
//! (`rust/helpers/dmaengine.c`) and are opaque here. All `unsafe` code of the
//! project's dmaengine support is in this module.

pub mod client;
pub mod provider;

use kernel::prelude::*;

/// Raw declarations of the C helpers in `rust/helpers/dmaengine.c`.
///
/// Every structure is opaque (`c_void`): only the helpers touch fields.
mod ffi {
    use kernel::dma::DmaAddress;
    use kernel::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

    /// A `struct dmaengine_desc_callback`: three pointers of the client's,
    /// only moved here (the helper checks the size with a static_assert).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub(super) struct RawCallback(pub(super) [usize; 3]);

    /// A `struct dmaengine_result`, what a client's result callback is
    /// given (the helper checks the layout with static_asserts).
    #[repr(C)]
    pub(super) struct RawResult {
        pub(super) result: c_uint,
        pub(super) residue: u32,
    }

    /// A `struct dma_tx_state` (the helper checks the layout with
    /// static_asserts).
    #[repr(C)]
    pub(super) struct RawTxState {
        pub(super) last: i32,
        pub(super) used: i32,
        pub(super) residue: u32,
        pub(super) in_flight_bytes: u32,
    }

    /// Mirror of `struct rust_dma_ops` in the helper file.
    #[repr(C)]
    pub(super) struct RawOps {
        pub(super) alloc_chan_resources: unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int,
        pub(super) free_chan_resources: unsafe extern "C" fn(*const c_void),
        pub(super) prep_memcpy: unsafe extern "C" fn(
            *const c_void,
            DmaAddress,
            DmaAddress,
            usize,
            c_ulong,
        ) -> *mut c_void,
        pub(super) tx_submit: unsafe extern "C" fn(*const c_void, c_ulong) -> i32,
        pub(super) issue_pending: unsafe extern "C" fn(*const c_void),
        pub(super) tx_status:
            unsafe extern "C" fn(*const c_void, i32, bool, *mut RawTxState) -> c_uint,
        pub(super) terminate_all: unsafe extern "C" fn(*const c_void) -> c_int,
        pub(super) synchronize: unsafe extern "C" fn(*const c_void),
        pub(super) release: unsafe extern "C" fn(*mut c_void),
    }

    extern "C" {
        pub(super) fn rust_dma_device_alloc(
            dev: *mut c_void,
            nr_chans: c_uint,
            ops: *const RawOps,
            ctx: *mut c_void,
            chan_ctx: *const *const c_void,
            free_wq: *mut kernel::bindings::workqueue_struct,
        ) -> *mut c_void;
        pub(super) fn rust_dma_dev_set_max_seg(dev: *mut c_void, size: u32) -> bool;
        pub(super) fn rust_dma_device_free(dma: *mut c_void);
        pub(super) fn rust_dma_device_register(dma: *mut c_void) -> c_int;
        pub(super) fn rust_dma_device_unregister(dma: *mut c_void);
        pub(super) fn rust_dma_device_chan(dma: *mut c_void, i: c_uint) -> *mut c_void;
        pub(super) fn rust_dma_chan_name(chan: *mut c_void) -> *const c_char;

        pub(super) fn rust_dma_desc_alloc(chan: *mut c_void, idx: c_ulong) -> *mut c_void;
        pub(super) fn rust_dma_desc_free(txd: *mut c_void);
        pub(super) fn rust_dma_desc_complete(txd: *mut c_void, cb: *mut RawCallback);
        pub(super) fn rust_dma_callback_invoke(
            cb: *const RawCallback,
            result: c_uint,
            residue: u32,
        );

        pub(super) fn rust_dma_request_memcpy_chan(
            filter: unsafe extern "C" fn(*mut c_void, *mut c_void) -> bool,
            param: *mut c_void,
        ) -> *mut c_void;
        pub(super) fn rust_dma_chan_has_terminate(chan: *mut c_void) -> bool;
        pub(super) fn rust_dma_chan_has_release(chan: *mut c_void) -> bool;
        pub(super) fn rust_dma_chan_max_seg(chan: *mut c_void) -> u32;
        pub(super) fn rust_dma_client_watch(
            chan: *mut c_void,
            removal: unsafe extern "C" fn(*mut c_void),
            ctx: *mut c_void,
            hold_module: bool,
        ) -> *mut c_void;
        pub(super) fn rust_dma_client_unwatch(watch: *mut c_void);
        pub(super) fn rust_dma_client_unwatch_scoped() -> core::ffi::c_uint;
        pub(super) fn rust_dma_chan_dev_bound(chan: *mut c_void) -> bool;
        pub(super) fn rust_dma_release_chan(chan: *mut c_void);
        pub(super) fn rust_dma_chan_dev(chan: *mut c_void) -> *mut c_void;
        pub(super) fn rust_dma_client_prep_memcpy(
            chan: *mut c_void,
            dst: DmaAddress,
            src: DmaAddress,
            len: usize,
            flags: c_ulong,
        ) -> *mut c_void;
        pub(super) fn rust_dma_client_submit(
            txd: *mut c_void,
            done: unsafe extern "C" fn(*mut c_void, *const RawResult),
            param: *mut c_void,
        ) -> i32;
        pub(super) fn rust_dma_client_issue_pending(chan: *mut c_void);
        pub(super) fn rust_dma_client_tx_complete(chan: *mut c_void, cookie: i32) -> bool;
        pub(super) fn rust_dma_client_terminate_sync(chan: *mut c_void) -> c_int;

        pub(super) fn rust_dma_buf_alloc(
            dev: *mut c_void,
            size: usize,
            dma: *mut DmaAddress,
        ) -> *mut c_void;
        pub(super) fn rust_dma_buf_free(
            dev: *mut c_void,
            buf: *mut c_void,
            size: usize,
            dma: DmaAddress,
        );
        pub(super) fn rust_dma_buf_for_cpu(dev: *mut c_void, dma: DmaAddress, size: usize);
        pub(super) fn rust_dma_buf_for_device(dev: *mut c_void, dma: DmaAddress, size: usize);
    }
}

/// A transaction cookie: the dmaengine core's sequence number of a submitted
/// descriptor. Negative values are errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie(i32);

impl Cookie {
    /// Builds the error cookie the core expects from a failed submission.
    pub fn error(err: Error) -> Self {
        Self(err.to_errno())
    }

    /// Returns the raw value.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// Returns whether this cookie reports a failed submission.
    pub fn is_error(self) -> bool {
        self.0 < 0
    }
}

/// How a transaction ended, as reported to the client's callback
/// (`enum dmaengine_tx_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum TxResult {
    /// The copy completed.
    NoError = 0,
    /// The engine could not read the source.
    ReadFailed = 1,
    /// The engine could not write the destination.
    WriteFailed = 2,
    /// The transaction was aborted before it completed.
    Aborted = 3,
}

impl TxResult {
    fn from_raw(raw: u32) -> Self {
        match raw {
            0 => Self::NoError,
            1 => Self::ReadFailed,
            2 => Self::WriteFailed,
            _ => Self::Aborted,
        }
    }
}

/// Flags of a prepared transaction (`enum dma_ctrl_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrepFlags(usize);

impl PrepFlags {
    /// `DMA_PREP_INTERRUPT`: the client wants a completion callback.
    pub const INTERRUPT: Self = Self(1 << 0);
    /// `DMA_CTRL_ACK`: the client will not chain on this descriptor.
    pub const ACK: Self = Self(1 << 1);

    /// Wraps raw flags from the core.
    pub fn from_raw(raw: usize) -> Self {
        Self(raw)
    }

    /// Returns the raw flags.
    pub fn raw(self) -> usize {
        self.0
    }

    /// Returns whether every flag of `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for PrepFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}
