// SPDX-License-Identifier: GPL-2.0

//! The client side: using any memcpy-capable channel.
//!
//! ```ignore
//! let chan = MemcpyChannel::request()?;
//! // Map buffers for `chan.device()`, then:
//! let result = chan.copy_sync(dst, src, len, 1000)?;
//! ```
//!
//! Clients with many copies in flight submit them one descriptor at a time
//! with [`MemcpyChannel::submit`], each reporting to a [`CopySink`], and
//! ring the doorbell once with [`MemcpyChannel::issue_pending`].

use super::{ffi, Cookie, PrepFlags, TxResult};
use core::ptr::NonNull;
use kernel::{
    device::Device,
    dma::DmaAddress,
    error::{from_err_ptr, to_result},
    ffi::c_void,
    new_condvar, new_spinlock_irq,
    prelude::*,
    str::CStr,
    sync::{
        atomic::{AtomicFlag, Relaxed},
        Arc, ArcBorrow, CondVar, CondVarTimeoutResult, SpinLockIrq,
    },
    time::msecs_to_jiffies,
};

/// Longest channel name kept, with its NUL (`dma%dchan%d` needs 21).
const NAME_LEN: usize = 32;

/// A DMA channel taken from the dmaengine core for memcpy.
///
/// Released when dropped.
///
/// # Invariants
///
/// `raw` is a channel this value holds (from `dma_request_channel`),
/// released once, in `drop`. `name` is its NUL-terminated name, copied at
/// request time: the name lives in the channel's `struct device`, which
/// the core frees when the provider unregisters, even while clients still
/// hold the channel.
pub struct MemcpyChannel {
    raw: NonNull<c_void>,
    name: [u8; NAME_LEN],
}

// SAFETY: A `struct dma_chan` may be used from any thread.
unsafe impl Send for MemcpyChannel {}
// SAFETY: The client operations used here are safe to call concurrently.
unsafe impl Sync for MemcpyChannel {}

/// Where a submitted copy reports its end.
#[pin_data]
struct Done {
    #[pin]
    // IRQ-safe: providers complete from tasklets, timers and IRQ threads.
    result: SpinLockIrq<Option<(TxResult, u32)>>,
    #[pin]
    cond: CondVar,
}

/// Receives the end of each descriptor given to [`MemcpyChannel::submit`].
pub trait CopySink: Send + Sync + 'static {
    /// The descriptor submitted with `tag` ended with `result`, `residue`
    /// bytes not copied.
    ///
    /// Runs in the provider's completion context (a tasklet, an IRQ
    /// thread or a timer): it must not sleep.
    fn descriptor_done(this: ArcBorrow<'_, Self>, tag: usize, result: TxResult, residue: u32);
}

/// Hears that the device behind a channel is about to lose its driver.
pub trait RemovalSink: Send + Sync + 'static {
    /// The channel's device is being unbound. The channel still works:
    /// terminate it and unmap every buffer mapped for the device before
    /// returning, since the DMA API expects none left once it is unbound.
    ///
    /// Runs in process context, from the unbinding thread; it may sleep.
    fn device_removing(this: ArcBorrow<'_, Self>);
}

/// A registered [`RemovalSink`]; dropping it unregisters it and waits for a
/// call in progress, so it must not be dropped from the sink's callback.
///
/// The sink's code is the module's, so no watch may outlive the module.
/// Inside a [`WatchScope`]'s life a watch holds nothing, and the scope ends
/// at the module's exit whatever watch is left (leaked rather than
/// dropped). Outside one it holds a reference on the module: a watch that
/// is forgotten keeps its sink and its module for good, which is a leak,
/// never a call into freed memory or unloaded code, but such a module
/// cannot be removed while it watches.
pub struct RemovalWatch {
    raw: NonNull<c_void>,
    ctx: *mut c_void,
    drop_ctx: unsafe fn(*mut c_void),
}

// SAFETY: The watch is a registration; it may be dropped from any thread.
unsafe impl Send for RemovalWatch {}
// SAFETY: `&RemovalWatch` gives no access to anything.
unsafe impl Sync for RemovalWatch {}

impl Drop for RemovalWatch {
    fn drop(&mut self) {
        // SAFETY: `raw` is our registration; after this call no callback
        // runs or will run, so the sink reference can go.
        unsafe {
            ffi::rust_dma_client_unwatch(self.raw.as_ptr());
            (self.drop_ctx)(self.ctx);
        }
    }
}

/// Whether this module's [`WatchScope`] is alive (each module builds its
/// own copy of this file, and of the C list the scope ends).
static SCOPED: AtomicFlag = AtomicFlag::new(false);

/// The time in which a module's removal watches need not hold the module:
/// made in module init, kept in the module's state after everything that
/// may own a watch (fields are dropped in declaration order), so that its
/// drop, at the module's exit, ends every watch still registered.
pub struct WatchScope(());

impl WatchScope {
    /// The module's scope; `EBUSY` if it has one already.
    pub fn new() -> Result<Self> {
        if SCOPED.xchg(true, Relaxed) {
            return Err(EBUSY);
        }
        Ok(Self(()))
    }
}

impl Drop for WatchScope {
    fn drop(&mut self) {
        // SAFETY: Ends the watches registered without a module reference;
        // their owners, if any, were leaked and never use them again.
        let left = unsafe { ffi::rust_dma_client_unwatch_scoped() };
        if left > 0 {
            pr_err!(
                "{} removal watches were leaked; ended at the module's exit\n",
                left
            );
        }
        SCOPED.store(false, Relaxed);
    }
}

/// # Safety
///
/// `ctx` is an `Arc<T>` reference given up by [`MemcpyChannel::watch_removal`].
unsafe fn drop_removal_ctx<T: RemovalSink>(ctx: *mut c_void) {
    // SAFETY: Per the function's contract.
    drop(unsafe { Arc::<T>::from_raw(ctx.cast::<T>()) });
}

/// # Safety
///
/// `ctx` is an `Arc<T>` reference owned by a live [`RemovalWatch`].
unsafe extern "C" fn removal_call<T: RemovalSink>(ctx: *mut c_void) {
    // SAFETY: The watch owns the reference and outlives every call.
    let sink = unsafe { ArcBorrow::<T>::from_raw(ctx.cast::<T>()) };
    T::device_removing(sink);
}

/// How a copy waited for by [`MemcpyChannel::copy_sync`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// It failed, timed out (`ETIMEDOUT`) or was interrupted (`EINTR`) and
    /// the channel stopped it: its buffers are free again.
    Failed(Error),
    /// It could not be stopped (the terminate's error): its buffers must
    /// stay mapped for good, since the engine may still write them.
    Unstopped(Error),
}

impl From<CopyError> for Error {
    fn from(e: CopyError) -> Self {
        match e {
            CopyError::Failed(e) | CopyError::Unstopped(e) => e,
        }
    }
}

/// What [`MemcpyChannel::submit`] hands to the completion callback.
struct SinkRef<T: CopySink> {
    sink: Arc<T>,
    tag: usize,
}

/// What [`MemcpyChannel::take`] looks for, and what its filter saw.
struct ChannelMatch<'a> {
    /// The channel's name; any channel if `None`.
    name: Option<&'a CStr>,
    /// A channel of that name was refused: its driver could not honour a
    /// client's lifetime rules (see [`MemcpyChannel::request`]).
    refused: bool,
}

/// The dmaengine core's filter for [`MemcpyChannel::take`]: runs under the
/// core's `dma_list_mutex`, once per free memcpy channel, until one is
/// accepted.
///
/// # Safety
///
/// `chan` is a channel the core offers for the duration of the call, and
/// `param` the `ChannelMatch` that `take` passed, alive and not otherwise
/// borrowed during the request.
unsafe extern "C" fn accept_channel(chan: *mut c_void, param: *mut c_void) -> bool {
    // SAFETY: Per the function's contract.
    let m = unsafe { &mut *param.cast::<ChannelMatch<'_>>() };
    if let Some(want) = m.name {
        // SAFETY: The channel (and its name) is alive during the call.
        let name = unsafe { CStr::from_char_ptr(ffi::rust_dma_chan_name(chan)) };
        if name.to_bytes() != want.to_bytes() {
            return false;
        }
    }
    // SAFETY: `chan` is alive during the call; the helpers only read its
    // device's operation table.
    let usable =
        unsafe { ffi::rust_dma_chan_has_terminate(chan) && ffi::rust_dma_chan_has_release(chan) };
    if !usable {
        m.refused = true;
    }
    usable
}

impl MemcpyChannel {
    /// Takes any free channel that can copy memory, whose driver can stop
    /// it and keeps it allocated while it is held.
    ///
    /// Two driver operations are required. `device_terminate_all`:
    /// [`Self::terminate`] is what lets a client free its buffers while
    /// copies are queued; the C `plx_dma` and `ioatdma` have none.
    /// `device_release`: a client may release its channel after the
    /// driver was unbound (a file closed late), and only a driver with a
    /// release callback keeps the channel's memory until then; `ptdma`,
    /// `hisi_dma`, `dw`, `fsl-qdma` and `sf-pdma` free it at unbind.
    /// `ENODEV` when no free channel qualifies.
    pub fn request() -> Result<Self> {
        Self::take(None)
    }

    /// Takes the memcpy channel called `name` (e.g. `dma0chan0`), if no
    /// other client holds it.
    ///
    /// `EOPNOTSUPP` when that channel's driver lacks one of the operations
    /// [`Self::request`] requires, `ENODEV` when there is no such free
    /// channel.
    pub fn request_named(name: &CStr) -> Result<Self> {
        Self::take(Some(name))
    }

    fn take(name: Option<&CStr>) -> Result<Self> {
        let mut wanted = ChannelMatch {
            name,
            refused: false,
        };
        // SAFETY: `accept_channel` matches the core's filter type and its
        // contract holds: `wanted` outlives the call and nothing else
        // borrows it meanwhile.
        let raw = unsafe {
            ffi::rust_dma_request_memcpy_chan(
                accept_channel,
                core::ptr::from_mut(&mut wanted).cast::<c_void>(),
            )
        };
        let Some(raw) = NonNull::new(raw) else {
            return Err(if name.is_some() && wanted.refused {
                EOPNOTSUPP
            } else {
                ENODEV
            });
        };
        let mut this = Self {
            raw,
            name: [0; NAME_LEN],
        };
        // SAFETY: We hold the channel, so its device (and name) is alive
        // now; the bytes are copied before this borrow ends.
        let cur = unsafe { CStr::from_char_ptr(ffi::rust_dma_chan_name(raw.as_ptr())) };
        let b = cur.to_bytes();
        let n = b.len().min(NAME_LEN - 1);
        this.name[..n].copy_from_slice(&b[..n]);
        // INVARIANT: `raw` is held and `name` ends in a NUL.
        Ok(this)
    }

    /// Returns the channel's name (e.g. `dma0chan0`), as it was when the
    /// channel was taken.
    pub fn name(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.name).unwrap_or(c"?")
    }

    /// Returns the device that maps buffers for this channel (the engine).
    pub fn device(&self) -> &Device {
        // SAFETY: The channel's device lives at least as long as our
        // reference on the channel, and `Device` is `repr(transparent)` over
        // `struct device`.
        unsafe { &*self.dev().cast::<Device>() }
    }

    /// The longest copy one descriptor of this channel may carry.
    pub fn max_segment(&self) -> u32 {
        // SAFETY: `self.raw` is a channel we hold.
        unsafe { ffi::rust_dma_chan_max_seg(self.raw.as_ptr()) }
    }

    /// Prepares and submits one copy of `len` bytes between DMA addresses
    /// of [`Self::device`]; `sink` hears of its end at most once, with
    /// `tag`.
    ///
    /// At most: a provider whose terminate frees descriptors without
    /// running their callbacks (virt-dma's do), or an engine declared dead
    /// with descriptors outstanding, never reports them. The reference on
    /// `sink` taken for the copy is then never dropped; a sink must not
    /// rely on hearing of every copy to free what the copies use, which is
    /// why [`CopySink`] implementers match reports by `tag` and ignore
    /// stale ones.
    ///
    /// `interrupt` asks for a completion interrupt; without one the copy is
    /// reported when a later one's interrupt arrives. Nothing starts before
    /// [`Self::issue_pending`]. `ENOSPC` means the provider had no
    /// descriptor free: wait for earlier copies, then try again.
    ///
    /// # Safety
    ///
    /// `dst` and `src` are DMA addresses of [`Self::device`] mapping `len`
    /// bytes each (`dst` writable by the device), and stay mapped until
    /// the copy has ended: `sink` heard of it, or a [`Self::terminate`]
    /// returned `Ok`. If a terminate fails they must stay mapped for good
    /// (the engine may still write `dst`). [`Self::copy_buffers`] is the
    /// safe way to copy between buffers of the abstraction's own.
    pub unsafe fn submit<T: CopySink>(
        &self,
        dst: DmaAddress,
        src: DmaAddress,
        len: usize,
        interrupt: bool,
        sink: &Arc<T>,
        tag: usize,
    ) -> Result<Cookie> {
        let ctx = KBox::new(
            SinkRef {
                sink: sink.clone(),
                tag,
            },
            GFP_KERNEL,
        )?;
        let mut flags = PrepFlags::ACK;
        if interrupt {
            flags = flags | PrepFlags::INTERRUPT;
        }
        // SAFETY: `self.raw` is a channel we hold.
        let txd = unsafe {
            ffi::rust_dma_client_prep_memcpy(self.raw.as_ptr(), dst, src, len, flags.raw())
        };
        if txd.is_null() {
            return Err(ENOSPC);
        }
        let ctx = KBox::into_raw(ctx).cast::<c_void>();
        // SAFETY: `txd` was just prepared on our channel; `ctx` is a
        // `KBox<SinkRef<T>>` that `sink_done::<T>` takes back exactly once.
        let cookie = Cookie(unsafe { ffi::rust_dma_client_submit(txd, sink_done::<T>, ctx) });
        if cookie.is_error() {
            // SAFETY: The callback will not run; take the box back.
            drop(unsafe { KBox::from_raw(ctx.cast::<SinkRef<T>>()) });
            return Err(Error::from_errno(cookie.raw()));
        }
        Ok(cookie)
    }

    /// Calls `sink` when the channel's device is about to be unbound.
    ///
    /// `ENODEV` when the device's driver is already going (or gone): the
    /// unbind that the watch would have reported began before it was
    /// registered, so nothing may be mapped for the device any more.
    pub fn watch_removal<T: RemovalSink>(&self, sink: Arc<T>) -> Result<RemovalWatch> {
        let ctx = Arc::into_raw(sink).cast_mut().cast::<c_void>();
        // Inside the module's scope the scope's end keeps the watch from
        // outliving the module; outside, a module reference does.
        let hold_module = !SCOPED.load(Relaxed);
        // SAFETY: `self.raw` is a channel we hold; `ctx` stays valid until
        // the watch is dropped, which unregisters it first (or for good if
        // the scope ends it).
        let raw = unsafe {
            ffi::rust_dma_client_watch(self.raw.as_ptr(), removal_call::<T>, ctx, hold_module)
        };
        match from_err_ptr(raw).ok().and_then(NonNull::new) {
            Some(raw) => {
                let watch = RemovalWatch {
                    raw,
                    ctx,
                    drop_ctx: drop_removal_ctx::<T>,
                };
                // Read after the watch is registered (see the helper).
                // SAFETY: `self.raw` is a channel we hold.
                if !unsafe { ffi::rust_dma_chan_dev_bound(self.raw.as_ptr()) } {
                    return Err(ENODEV);
                }
                Ok(watch)
            }
            None => {
                // SAFETY: Not registered: the reference is ours again.
                unsafe { drop_removal_ctx::<T>(ctx) };
                Err(from_err_ptr(raw).err().unwrap_or(ENOMEM))
            }
        }
    }

    /// Starts what [`Self::submit`] queued.
    pub fn issue_pending(&self) {
        // SAFETY: `self.raw` is a channel we hold.
        unsafe { ffi::rust_dma_client_issue_pending(self.raw.as_ptr()) };
    }

    fn dev(&self) -> *mut c_void {
        // SAFETY: `self.raw` is a channel we hold.
        unsafe { ffi::rust_dma_chan_dev(self.raw.as_ptr()) }
    }

    /// Copies `len` bytes from the start of `src` to the start of `dst`,
    /// buffers of this channel, and waits up to `timeout_ms` as
    /// [`Self::copy_sync`] does.
    ///
    /// `EINVAL` if `len` is 0, exceeds either buffer, or a buffer belongs
    /// to another channel. When the copy cannot be stopped after a timeout
    /// or a signal, the terminate's error is returned and both buffers are
    /// abandoned: they stay allocated and mapped for good instead of
    /// being freed under the engine.
    pub fn copy_buffers(
        &self,
        dst: &mut DmaBuffer<'_>,
        src: &DmaBuffer<'_>,
        len: usize,
        timeout_ms: u32,
    ) -> Result<(TxResult, u32)> {
        let ours = |b: &DmaBuffer<'_>| core::ptr::eq(b.chan, self);
        if len == 0 || len > dst.size || len > src.size || !ours(dst) || !ours(src) {
            return Err(EINVAL);
        }
        // SAFETY: Both buffers are mapped for this channel's device with
        // at least `len` bytes, borrowed for the whole call, and abandoned
        // below (never unmapped) if the copy could not be stopped.
        match unsafe { self.copy_sync(dst.dma, src.dma, len, timeout_ms) } {
            Ok(r) => Ok(r),
            Err(CopyError::Failed(e)) => Err(e),
            Err(CopyError::Unstopped(e)) => {
                dst.abandon();
                src.abandon();
                Err(e)
            }
        }
    }

    /// Copies `len` bytes between two DMA addresses of [`Self::device`] and
    /// waits up to `timeout_ms` (interruptibly) for the result.
    ///
    /// When no completion arrives in time, the channel's status is polled
    /// once: a copy the engine finished without its interrupt reaching us
    /// (a lost interrupt) is reaped then and its result returned, with a
    /// warning. A copy still pending at the timeout, or on a signal,
    /// terminates the channel, so that the copy can no longer touch the
    /// buffers, and `ETIMEDOUT` or `EINTR` is returned. If the channel
    /// cannot be stopped, the terminate's error is returned instead, as
    /// [`CopyError::Unstopped`], and the copy may still write `dst`: the
    /// caller must then keep both buffers mapped.
    ///
    /// # Safety
    ///
    /// As for [`Self::submit`]: `dst` and `src` map `len` bytes for
    /// [`Self::device`], and stay mapped until this returns, for good if
    /// it returns an error from the terminate. [`Self::copy_buffers`] is
    /// the safe form.
    pub unsafe fn copy_sync(
        &self,
        dst: DmaAddress,
        src: DmaAddress,
        len: usize,
        timeout_ms: u32,
    ) -> core::result::Result<(TxResult, u32), CopyError> {
        let done = Arc::pin_init(
            pin_init!(Done {
                result <- new_spinlock_irq!(None),
                cond <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
        .map_err(CopyError::Failed)?;
        let flags = PrepFlags::INTERRUPT | PrepFlags::ACK;
        // SAFETY: `self.raw` is a channel we hold.
        let txd = unsafe {
            ffi::rust_dma_client_prep_memcpy(self.raw.as_ptr(), dst, src, len, flags.raw())
        };
        if txd.is_null() {
            return Err(CopyError::Failed(EIO));
        }
        let ctx = done.clone().into_raw().cast_mut().cast::<c_void>();
        // SAFETY: `txd` was just prepared on our channel; `ctx` is an `Arc`
        // reference that `copy_done` takes back exactly once.
        let cookie = Cookie(unsafe { ffi::rust_dma_client_submit(txd, copy_done, ctx) });
        if cookie.is_error() {
            // SAFETY: The callback will not run; take the reference back.
            drop(unsafe { Arc::from_raw(ctx.cast::<Done>()) });
            return Err(CopyError::Failed(Error::from_errno(cookie.raw())));
        }
        // SAFETY: `self.raw` is a channel we hold.
        unsafe { ffi::rust_dma_client_issue_pending(self.raw.as_ptr()) };

        let mut left = msecs_to_jiffies(timeout_ms);
        let mut guard = done.result.lock();
        while guard.is_none() {
            match done.cond.wait_interruptible_timeout(&mut guard, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => break,
                CondVarTimeoutResult::Signal { .. } => {
                    drop(guard);
                    self.terminate().map_err(CopyError::Unstopped)?;
                    return Err(CopyError::Failed(EINTR));
                }
            }
        }
        if let Some(r) = *guard {
            return Ok(r);
        }
        drop(guard);
        // The engine may have finished without its completion interrupt
        // reaching us (a lost interrupt). Asking for the status makes the
        // driver reap finished work; only a copy that is still pending has
        // really timed out.
        // SAFETY: `self.raw` is a channel we hold and `cookie` was issued on it.
        if unsafe { ffi::rust_dma_client_tx_complete(self.raw.as_ptr(), cookie.raw()) } {
            // The callback follows the cookie's completion (at once here,
            // or from another CPU that is completing it).
            let mut guard = done.result.lock();
            let mut left = msecs_to_jiffies(timeout_ms);
            while guard.is_none() {
                match done.cond.wait_interruptible_timeout(&mut guard, left) {
                    CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                    _ => break,
                }
            }
            if let Some(r) = *guard {
                drop(guard);
                dev_warn!(
                    self.device(),
                    "{}: copy done after {} ms without a completion interrupt (found by polling)\n",
                    self.name(),
                    timeout_ms
                );
                return Ok(r);
            }
        }
        self.terminate().map_err(CopyError::Unstopped)?;
        Err(CopyError::Failed(ETIMEDOUT))
    }

    /// Aborts everything queued on the channel and waits for the callbacks
    /// of what was running to finish.
    ///
    /// Only `Ok` means the engine no longer touches any buffer of the
    /// copies submitted so far. On an error the provider could not stop
    /// them: their buffers must stay mapped (and user pages pinned) for
    /// good, since the engine may still write them.
    #[must_use = "buffers may be released only once the channel has stopped"]
    pub fn terminate(&self) -> Result {
        // SAFETY: `self.raw` is a channel we hold; we are in process context.
        to_result(unsafe { ffi::rust_dma_client_terminate_sync(self.raw.as_ptr()) })
    }
}

/// A kernel buffer mapped for a channel's device (streaming DMA, both
/// directions). The CPU reaches it only through [`DmaBuffer::write`] and
/// [`DmaBuffer::read`], which hand ownership over as the DMA API requires.
pub struct DmaBuffer<'a> {
    chan: &'a MemcpyChannel,
    buf: NonNull<u8>,
    size: usize,
    dma: DmaAddress,
    /// An engine that could not be stopped may still write the buffer: it
    /// is never unmapped nor freed.
    abandoned: AtomicFlag,
}

impl<'a> DmaBuffer<'a> {
    /// Allocates and maps `size` zeroed bytes for `chan`'s device.
    pub fn new(chan: &'a MemcpyChannel, size: usize) -> Result<Self> {
        if size == 0 {
            return Err(EINVAL);
        }
        let mut dma: DmaAddress = 0;
        // SAFETY: `chan.dev()` is the live device of a channel we hold.
        let buf = unsafe { ffi::rust_dma_buf_alloc(chan.dev(), size, &mut dma) };
        let buf = NonNull::new(buf.cast::<u8>()).ok_or(ENOMEM)?;
        Ok(Self {
            chan,
            buf,
            size,
            dma,
            abandoned: AtomicFlag::new(false),
        })
    }

    /// Gives the buffer up to an engine that would not stop: it stays
    /// allocated and mapped for good (for [`CopyError::Unstopped`]).
    pub fn abandon(&self) {
        self.abandoned.store(true, Relaxed);
    }

    /// The device address of the buffer.
    pub fn dma_address(&self) -> DmaAddress {
        self.dma
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether the buffer is empty (never: `new` refuses zero).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Copies `data` into the buffer at `offset` and gives it to the device.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result {
        let end = offset.checked_add(data.len()).ok_or(EINVAL)?;
        if end > self.size {
            return Err(EINVAL);
        }
        // SAFETY: The mapping is ours; after `for_cpu` the CPU owns it, and
        // `offset..end` lies inside the allocation.
        unsafe {
            ffi::rust_dma_buf_for_cpu(self.chan.dev(), self.dma, self.size);
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.buf.as_ptr().add(offset),
                data.len(),
            );
            ffi::rust_dma_buf_for_device(self.chan.dev(), self.dma, self.size);
        }
        Ok(())
    }

    /// Copies all of `src` into this buffer with the CPU (a baseline for
    /// what the engine offloads).
    pub fn cpu_copy_from(&mut self, src: &DmaBuffer<'_>) -> Result {
        if src.size > self.size {
            return Err(EINVAL);
        }
        // SAFETY: Both mappings are ours; between `for_cpu` and
        // `for_device` the CPU owns them, and `src.size` bytes fit in both.
        unsafe {
            ffi::rust_dma_buf_for_cpu(src.chan.dev(), src.dma, src.size);
            ffi::rust_dma_buf_for_cpu(self.chan.dev(), self.dma, self.size);
            core::ptr::copy_nonoverlapping(src.buf.as_ptr(), self.buf.as_ptr(), src.size);
            ffi::rust_dma_buf_for_device(self.chan.dev(), self.dma, self.size);
            ffi::rust_dma_buf_for_device(src.chan.dev(), src.dma, src.size);
        }
        Ok(())
    }

    /// Copies the buffer from `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
        if end > self.size {
            return Err(EINVAL);
        }
        // SAFETY: As in `write`.
        unsafe {
            ffi::rust_dma_buf_for_cpu(self.chan.dev(), self.dma, self.size);
            core::ptr::copy_nonoverlapping(
                self.buf.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            );
            ffi::rust_dma_buf_for_device(self.chan.dev(), self.dma, self.size);
        }
        Ok(())
    }
}

impl Drop for DmaBuffer<'_> {
    fn drop(&mut self) {
        if self.abandoned.load(Relaxed) {
            dev_warn!(
                self.chan.device(),
                "{}: keeping a {} byte DMA buffer its engine may still write\n",
                self.chan.name(),
                self.size
            );
            return;
        }
        // SAFETY: The buffer was mapped in `new` for this device and is
        // unmapped and freed once.
        unsafe {
            ffi::rust_dma_buf_free(
                self.chan.dev(),
                self.buf.as_ptr().cast(),
                self.size,
                self.dma,
            )
        };
    }
}

impl Drop for MemcpyChannel {
    fn drop(&mut self) {
        // SAFETY: We hold the channel and give it back once. Its driver
        // has a `device_release` (`accept_channel` took no other), so the
        // core keeps the channel's memory until this put, even when the
        // driver was unbound meanwhile.
        unsafe { ffi::rust_dma_release_chan(self.raw.as_ptr()) };
    }
}

/// # Safety
///
/// `ctx` is a `KBox<SinkRef<T>>` handed to `rust_dma_client_submit` by
/// [`MemcpyChannel::submit`], and `res` a valid result; the core calls a
/// descriptor's result callback once.
unsafe extern "C" fn sink_done<T: CopySink>(ctx: *mut c_void, res: *const ffi::RawResult) {
    // SAFETY: `ctx` is the box given to `rust_dma_client_submit`, called
    // back once; `res` is valid for the call.
    let (r, res) = unsafe { (KBox::from_raw(ctx.cast::<SinkRef<T>>()), &*res) };
    T::descriptor_done(
        r.sink.as_arc_borrow(),
        r.tag,
        TxResult::from_raw(res.result),
        res.residue,
    );
}

/// # Safety
///
/// `ctx` is an `Arc<Done>` reference handed to `rust_dma_client_submit` by
/// [`MemcpyChannel::copy_sync`], and `res` a valid result; the core calls a
/// descriptor's result callback once.
unsafe extern "C" fn copy_done(ctx: *mut c_void, res: *const ffi::RawResult) {
    // SAFETY: `ctx` is the `Arc<Done>` reference given to
    // `rust_dma_client_submit`, called back once; `res` is valid for the
    // call.
    let (done, res) = unsafe { (Arc::<Done>::from_raw(ctx.cast::<Done>()), &*res) };
    *done.result.lock() = Some((TxResult::from_raw(res.result), res.residue));
    done.cond.notify_all();
}
