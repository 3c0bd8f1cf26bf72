// SPDX-License-Identifier: GPL-2.0

//! A dmaengine provider, written with the Rust abstraction, that misuses
//! the handles the abstraction gives it, in two ways safe code can:
//!
//! - channel 0 keeps a client's completion callback ([`Callback`]) past
//!   the client's release of the channel, and invokes it when the next
//!   client takes the channel;
//! - channel 1 drops its [`Submitter`] and [`Completer`] as soon as it has
//!   prepared a descriptor, while the client holds that descriptor.
//!
//! Neither may reach freed memory or a client that has gone: the stale
//! callback must not run, and the submit must fail with an error cookie.
//! `plx_misuse_client` drives both and checks what it sees; KASAN watches
//! the memory. The channels copy nothing: a submitted descriptor completes
//! at once.

// The abstractions are shared source, written with the visibility they
// would have in `rust/kernel`; this module uses part of them.
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../../rust/kernel/module_queue.rs"]
mod module_queue;

use dmaengine::{
    provider::{
        Callback, ChannelOps, Completer, DescPool, Memcpy, NewChannel, Prepared, Preparer,
        Registration, Submitter,
    },
    Cookie, PrepFlags, TxResult,
};
use kernel::{
    devres::Devres,
    dma::DmaAddress,
    faux, new_spinlock,
    prelude::*,
    sync::{Arc, ArcBorrow, SpinLock},
};
use module_queue::WithQueues;

module! {
    type: MisuseProvider,
    name: "rust_misuse_provider",
    authors: ["rust-plx-dma"],
    description: "A Rust dmaengine provider that misuses its descriptor handles (test)",
    license: "GPL",
}

/// How a channel misuses its handles.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Misuse {
    /// Keeps a client's callback past its release.
    StaleCallback,
    /// Drops the pool's handles while the client holds a descriptor.
    EarlyDrop,
}

/// What the channel holds of its current (and former) client.
#[derive(Default)]
struct Handles {
    sub: Option<Submitter>,
    comp: Option<Completer>,
    /// A callback of a former client, kept on purpose.
    stale: Option<Callback>,
    /// That client's completer, kept on purpose.
    stale_comp: Option<Completer>,
}

#[pin_data]
struct MisuseChan {
    misuse: Misuse,
    #[pin]
    handles: SpinLock<Handles>,
}

impl ChannelOps for MisuseChan {
    fn alloc_resources(&self, chan: NewChannel<'_>) -> Result<u32> {
        // The misuse: a former client's callback, invoked now through the
        // former client's own completer, which the channel kept too.
        let (stale, old) = {
            let mut h = self.handles.lock();
            (h.stale.take(), h.stale_comp.take())
        };
        if let (Some(cb), Some(old)) = (stale, old) {
            old.runner().run(|gate| gate.invoke(cb));
        }
        let (sub, comp) = DescPool::alloc(chan, 2)?;
        let mut h = self.handles.lock();
        h.sub = Some(sub);
        h.comp = Some(comp);
        Ok(2)
    }

    fn free_resources(&self) {
        let mut h = self.handles.lock();
        h.sub = None;
        // Kept past the release on the callback channel (the misuse).
        let comp = h.comp.take();
        if h.stale.is_some() {
            h.stale_comp = comp;
        }
    }

    fn prep_memcpy<'a>(
        &self,
        prep: &Preparer<'a>,
        _dst: DmaAddress,
        _src: DmaAddress,
        _len: usize,
        _flags: PrepFlags,
    ) -> Result<Prepared<'a>> {
        let prepared = prep.prepare(Memcpy::default()).ok_or(ENOSPC)?;
        if self.misuse == Misuse::EarlyDrop {
            // The misuse: every handle of the pool goes, the client's
            // descriptor with it unless the abstraction keeps it.
            let mut h = self.handles.lock();
            h.sub = None;
            h.comp = None;
        }
        Ok(prepared)
    }

    fn tx_submit(&self, index: usize) -> Cookie {
        let mut guard = self.handles.lock();
        let h = &mut *guard;
        let (Some(sub), Some(comp)) = (h.sub.as_mut(), h.comp.as_mut()) else {
            return Cookie::error(ENODEV);
        };
        let Ok((cookie, submitted, _)) = sub.submit(index) else {
            return Cookie::error(EINVAL);
        };
        // Completes at once: nothing is copied.
        let Ok(finished) = sub.finish(submitted, TxResult::NoError, 0) else {
            return Cookie::error(EINVAL);
        };
        let Ok((cb, idle)) = comp.complete(finished) else {
            return Cookie::error(EINVAL);
        };
        sub.release(idle);
        if self.misuse == Misuse::StaleCallback {
            // Kept instead of invoked (see `alloc_resources`).
            h.stale = Some(cb);
        } else {
            let runner = comp.runner();
            drop(guard);
            runner.run(|gate| gate.invoke(cb));
        }
        cookie
    }

    fn issue_pending(&self) {}

    fn poll(&self, _cookie: Cookie) -> u32 {
        0
    }

    fn terminate_all(_this: ArcBorrow<'_, Self>) -> Result {
        Ok(())
    }

    fn synchronize(&self) {}
}

/// The faux device and the provider registered on it.
struct Provider {
    _reg: Devres<Registration<MisuseChan>>,
    _faux: faux::Registration,
}

#[pin_data]
struct MisuseProvider {
    #[pin]
    _provider: WithQueues<Provider>,
}

impl kernel::InPlaceModule for MisuseProvider {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _provider <- WithQueues::new(c"rust_misuse_provider", Provider::new),
        })
    }
}

impl Provider {
    fn new() -> Result<Self> {
        let fdev = faux::Registration::new(c"rust_misuse_provider", None)?;
        let mut chans = KVec::with_capacity(2, GFP_KERNEL)?;
        for misuse in [Misuse::StaleCallback, Misuse::EarlyDrop] {
            chans.push(
                Arc::pin_init(
                    pin_init!(MisuseChan {
                        misuse,
                        handles <- new_spinlock!(Handles::default()),
                    }),
                    GFP_KERNEL,
                )?,
                GFP_KERNEL,
            )?;
        }
        let reg = Registration::new(fdev.as_ref().as_ref(), chans, 1 << 20)?;
        Ok(Self {
            _reg: reg,
            _faux: fdev,
        })
    }
}
