// SPDX-License-Identifier: GPL-2.0

//! Reaping completions in softirq context.
//!
//! The hard IRQ handler acknowledges the engine; someone must then reap
//! the write-backs and run the client callbacks, which may not happen in
//! hard IRQ context. Waking the IRQ thread for it costs a context switch
//! per interrupt. Queued on the BH workqueue instead, the reap runs in
//! softirq context right after the interrupt returns, as tasklets did,
//! and where dmaengine clients expect their callbacks. Only an engine
//! error, whose recovery sleeps, still goes to the IRQ thread. The module
//! parameter `irq_thread=1` sends every interrupt there (see
//! [`ChannelConfig::reap_in_thread`](super::ChannelConfig::reap_in_thread)).

use super::PlxChannel;
use crate::module_queue::{self, QueueKind};
use kernel::{
    impl_has_work,
    sync::{Arc, ArcBorrow},
    workqueue::WorkItem,
};

/// Work item ID of the reap work (the recovery work is ID 0).
pub(super) const REAP: u64 = 1;

impl PlxChannel {
    /// Queues a reap on the BH workqueue; hard IRQ safe. A reap already
    /// queued covers this one: it reads every write-back when it runs.
    pub(crate) fn queue_reap(this: ArcBorrow<'_, Self>) {
        let _ = module_queue::queue(QueueKind::Bh).enqueue::<Arc<Self>, REAP>(Arc::from(this));
    }
}

impl WorkItem<REAP> for PlxChannel {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        if this.reap_interrupt() {
            // The recovery sleeps while the engine stops: not here.
            PlxChannel::queue_recovery(this.as_arc_borrow(), true);
        }
    }
}

impl_has_work! {
    impl HasWork<Self, REAP> for PlxChannel { self.reap_work }
}
