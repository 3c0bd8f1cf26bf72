// SPDX-License-Identifier: GPL-2.0

//! The devices users create: `rdma link add NAME type plx netdev DEV`.
//!
//! Each gets its own memcpy channel (or the CPU when none is left), its
//! port on `DEV`, and its counters in debugfs as `plx_rdma/NAME`.
//! `rdma link delete NAME` is carried out by ib_core, which unregisters
//! the device and tells [`Links`]; a work item on the module's queue then
//! drops the registration, which frees the device and its channel.

use crate::{
    module_queue::{self, QueueKind},
    net::PortHub,
    net_ns::NetNs,
    new_device,
    rdma::link::{LinkRequest, NewLink},
    CountedDevice,
};
use kernel::{
    debugfs, impl_has_work, new_mutex, new_work,
    prelude::*,
    str::CString,
    sync::{Arc, ArcBorrow, Mutex},
    workqueue::{Work, WorkItem},
};

/// The module's `rdma link` devices.
#[pin_data]
pub(crate) struct Links {
    #[pin]
    devices: Mutex<KVec<CountedDevice>>,
    /// Where each device's counters go.
    dir: debugfs::Dir,
    /// The UDP port the devices share.
    hub: Arc<PortHub>,
    /// The netdev of the parameters' device (0: none).
    param_ifindex: i32,
    /// Drops the registrations ib_core unregistered.
    #[pin]
    reap: Work<Links>,
}

impl_has_work! {
    impl HasWork<Self> for Links { self.reap }
}

impl Links {
    pub(crate) fn new(
        dir: debugfs::Dir,
        hub: Arc<PortHub>,
        param_ifindex: i32,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- new_mutex!(KVec::new(), "plx_rdma_links"),
                dir,
                hub,
                param_ifindex,
                reap <- new_work!("plx_rdma_links::reap"),
            }),
            GFP_KERNEL,
        )
    }
}

impl Links {
    /// Drops every device (module unload, once no new one can come).
    pub(crate) fn clear(&self) {
        let gone = core::mem::take(&mut *self.devices.lock());
        drop(gone);
    }
}

impl NewLink for Links {
    fn new_link(&self, req: &LinkRequest<'_>) -> Result {
        // One device per netdev: the port hands a datagram to the device
        // whose netdev has its destination address. (Two requests for one
        // netdev at once may both pass; the second's datagrams then go
        // to the first.)
        let taken = (req.net.same(&NetNs::init()) && req.ifindex == self.param_ifindex)
            || self.devices.lock().iter().any(|d| {
                let dev = &d.reg.driver().0;
                dev.net.same(&req.net) && dev.ifindex == req.ifindex
            });
        if taken {
            pr_err!("{}: the netdev has a plx_rdma device already\n", req.name);
            return Err(EEXIST);
        }
        let reg = new_device(req.name, &req.net, req.ifindex, true, &self.hub)?;
        let name = CString::try_from(reg.name())?;
        let dev = CountedDevice::new(&self.dir, &name, reg)?;
        // Not kept (no memory): dropping it unregisters it again.
        self.devices.lock().push(dev, GFP_KERNEL)?;
        Ok(())
    }

    fn unregistered(this: ArcBorrow<'_, Self>) {
        // Queued already: that run sees this device too.
        let _ = module_queue::queue(QueueKind::Long).enqueue(Arc::from(this));
    }
}

impl WorkItem for Links {
    type Pointer = Arc<Links>;

    fn run(this: Arc<Links>) {
        let mut gone = KVec::new();
        {
            let mut devices = this.devices.lock();
            let mut i = 0;
            while i < devices.len() {
                if devices[i].reg.is_live() {
                    i += 1;
                    continue;
                }
                let Ok(d) = devices.remove(i) else {
                    break;
                };
                // Without room to move it out, `push` drops it here,
                // under the lock: that only waits for ib_core's
                // unregistration to end, which takes no lock of ours.
                let _ = gone.push(d, GFP_KERNEL);
            }
        }
        for d in gone.drain_all() {
            pr_info!("{}: deleted\n", d.reg.name());
            drop(d);
        }
    }
}
