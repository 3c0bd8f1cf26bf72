// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables softirqs (bottom halves) on the local CPU
//! while held: C's `spin_lock_bh`.
//!
//! For data shared between process context and softirq context (BH work
//! items, tasklets, soft hrtimers) and never touched in hard IRQ context.
//! It is cheaper than [`kernel::sync::SpinLockIrq`]: interrupts stay
//! enabled, so the lock costs a preempt-count update instead of saving,
//! masking and restoring the interrupt flag and the interrupt-disable
//! count. Taking it in hard IRQ context, or with interrupts disabled, is a
//! bug (`local_bh_enable` would then run softirqs with interrupts off);
//! lockdep reports it.
//!
//! The C side is `rust/helpers/spinlock_bh.c`.

use kernel::{bindings, ffi::c_char, sync::lock::Backend};

mod ffi {
    use kernel::{bindings::spinlock_t, ffi::c_int};

    extern "C" {
        #[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_LOCK_BH))]
        pub(super) fn rust_spin_lock_bh(lock: *mut spinlock_t);
        #[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_UNLOCK_BH))]
        pub(super) fn rust_spin_unlock_bh(lock: *mut spinlock_t);
        pub(super) fn rust_spin_trylock_bh(lock: *mut spinlock_t) -> c_int;
        pub(super) fn rust_irqs_disabled() -> bool;
    }
}

/// Whether a [`SpinLockBh`] may be taken here: not with local interrupts
/// off, which includes hard IRQ context (a holder this CPU interrupted
/// could never let go). Code that may be called there (a dmaengine
/// terminate, say) asks first and takes another way.
pub(crate) fn may_lock_bh() -> bool {
    // SAFETY: Reads the local CPU's interrupt flag; always safe.
    !unsafe { ffi::rust_irqs_disabled() }
}

/// The lock and unlock a guard calls, once per lock round trip.
///
/// Where `spin_lock_bh()` is the kernel's out-of-line `_raw_spin_lock_bh()`
/// on the `raw_spinlock_t` at the start of `spinlock_t` (no
/// `CONFIG_PREEMPT_RT`, whose `spinlock_t` is an rt_mutex, and the `_bh`
/// calls not inlined), those are called directly; elsewhere through the C
/// helpers. Under emulation every call and return costs a lookup of its
/// target, and the ring lock is taken twice per copy.
mod raw {
    use kernel::bindings::spinlock_t;

    /// # Safety
    ///
    /// `ptr` points to an initialised lock.
    #[inline(always)]
    pub(super) unsafe fn lock(ptr: *mut spinlock_t) {
        #[cfg(not(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_LOCK_BH)))]
        // SAFETY: Without `CONFIG_PREEMPT_RT`, `spinlock_t` is one union
        // whose `rlock` member, the `raw_spinlock_t` that `spin_lock_bh()`
        // takes, starts at offset 0: `ptr` points to that initialised
        // `raw_spinlock_t`, as the caller vouched.
        unsafe {
            kernel::bindings::_raw_spin_lock_bh(ptr.cast())
        };
        #[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_LOCK_BH))]
        // SAFETY: As the caller vouched.
        unsafe {
            super::ffi::rust_spin_lock_bh(ptr)
        };
    }

    /// # Safety
    ///
    /// `ptr` points to a lock the caller took with [`lock`] or a `_bh`
    /// trylock.
    #[inline(always)]
    pub(super) unsafe fn unlock(ptr: *mut spinlock_t) {
        #[cfg(not(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_UNLOCK_BH)))]
        // SAFETY: As in `lock`: the lock's `raw_spinlock_t`, held by the
        // caller.
        unsafe {
            kernel::bindings::_raw_spin_unlock_bh(ptr.cast())
        };
        #[cfg(any(CONFIG_PREEMPT_RT, CONFIG_INLINE_SPIN_UNLOCK_BH))]
        // SAFETY: As the caller vouched.
        unsafe {
            super::ffi::rust_spin_unlock_bh(ptr)
        };
    }
}

/// A spinlock taken with softirqs disabled; see the module documentation.
pub(crate) type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with the given name and a new
/// lock class.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal) => {
        $crate::spinlock_bh::SpinLockBh::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

// SAFETY: The kernel's `spinlock_t` ensures mutual exclusion; `lock` and
// `unlock` pair `spin_lock_bh` with `spin_unlock_bh`, and `relock` uses the
// default implementation, which calls `lock` again.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(ptr: *mut Self::State, name: *const c_char, key: *mut bindings::lock_class_key) {
        // SAFETY: The caller guarantees that `ptr` is valid for writes and
        // that `name` and `key` stay valid for reads indefinitely.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    #[inline(always)]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees that `ptr` points to an initialised
        // lock.
        unsafe { raw::lock(ptr) }
    }

    #[inline(always)]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller guarantees that `ptr` is valid and that it owns
        // the lock, taken by `lock` or `try_lock` (softirqs disabled).
        unsafe { raw::unlock(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The caller guarantees that `ptr` points to an initialised
        // lock.
        (unsafe { ffi::rust_spin_trylock_bh(ptr) } != 0).then_some(())
    }

    // Called by every `Guard::new`: without lockdep it checks nothing, so
    // it is not worth a call into C per lock then.
    #[cfg(CONFIG_LOCKDEP)]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The caller guarantees that `ptr` points to an initialised
        // lock.
        unsafe { bindings::spin_assert_is_held(ptr) }
    }

    #[cfg(not(CONFIG_LOCKDEP))]
    #[inline(always)]
    unsafe fn assert_is_held(_ptr: *mut Self::State) {}
}
