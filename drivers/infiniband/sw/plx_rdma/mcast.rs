// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD QPs of a device take the datagrams sent to
//! a multicast GID.
//!
//! `ibv_attach_mcast` (which librdmacm calls once `rdma_join_multicast`
//! has joined the group) attaches a UD QP to a group, `ibv_detach_mcast`
//! and the QP's destruction detach it. A UD SEND to destination QP
//! `0xFFFFFF` whose IP destination is a group's address reaches every QP
//! attached to that group on a device the datagram arrives at: each gets
//! its own copy, taken by its own receive, and a QP without one, or with
//! another Q_Key, misses it (unreliable delivery), as in rxe.
//!
//! Sending needs nothing of this: a datagram to a multicast GID goes out
//! of the port's netdev, and IP loops a copy back to this host when it is
//! a member of the group (rdma_cm's join makes it one), where it arrives
//! like any other. Joining the group at the IP and link layer is rdma_cm's
//! business (IGMP or MLD through the netdev), as with rxe.

use kernel::{new_mutex, prelude::*, sync::Mutex};

/// The destination QP of a multicast datagram.
pub(crate) const MCAST_QPN: u32 = 0xff_ffff;
/// Groups per device.
pub(crate) const MAX_GROUPS: u32 = 1024;
/// QPs attached to one group.
pub(crate) const MAX_QPS_PER_GROUP: u32 = 64;

/// One group: its GID and the numbers of the QPs attached.
struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// The multicast groups of a device.
#[pin_data]
pub(crate) struct Groups {
    #[pin]
    groups: Mutex<KVec<Group>>,
}

impl Groups {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            groups <- new_mutex!(KVec::new(), "plx_rdma_mcast"),
        })
    }

    /// Attaches QP `qpn` to group `mgid`; attaching it again changes
    /// nothing. `ENOMEM` when the device has [`MAX_GROUPS`] groups or
    /// the group [`MAX_QPS_PER_GROUP`] QPs.
    pub(crate) fn attach(&self, mgid: &[u8; 16], qpn: u32) -> Result {
        let mut groups = self.groups.lock();
        let at = match groups.iter().position(|g| g.mgid == *mgid) {
            Some(i) => i,
            None => {
                if groups.len() >= MAX_GROUPS as usize {
                    return Err(ENOMEM);
                }
                groups.push(
                    Group {
                        mgid: *mgid,
                        qpns: KVec::new(),
                    },
                    GFP_KERNEL,
                )?;
                groups.len() - 1
            }
        };
        let group = &mut groups[at];
        let ret = if group.qpns.contains(&qpn) {
            Ok(())
        } else if group.qpns.len() >= MAX_QPS_PER_GROUP as usize {
            Err(ENOMEM)
        } else {
            group.qpns.push(qpn, GFP_KERNEL).map_err(Error::from)
        };
        // A group made for this call and left empty by its failure goes.
        if groups[at].qpns.is_empty() {
            let _ = groups.remove(at);
        }
        ret
    }

    /// Detaches QP `qpn` from group `mgid`, and drops the group when it
    /// was the last; `EINVAL` if it was not attached (as rxe).
    pub(crate) fn detach(&self, mgid: &[u8; 16], qpn: u32) -> Result {
        let mut groups = self.groups.lock();
        let at = groups.iter().position(|g| g.mgid == *mgid).ok_or(EINVAL)?;
        let group = &mut groups[at];
        let i = group.qpns.iter().position(|&q| q == qpn).ok_or(EINVAL)?;
        let _ = group.qpns.remove(i);
        if group.qpns.is_empty() {
            let _ = groups.remove(at);
        }
        Ok(())
    }

    /// Detaches QP `qpn` from every group (its destruction: ib_core
    /// detaches a user's QP first, a number must not outlive its QP all
    /// the same).
    pub(crate) fn detach_all(&self, qpn: u32) {
        let mut groups = self.groups.lock();
        for g in groups.iter_mut() {
            g.qpns.retain(|q| *q != qpn);
        }
        groups.retain(|g| !g.qpns.is_empty());
    }

    /// The numbers of the QPs attached to group `mgid` (none if there is
    /// no such group), copied out so that the lock is not held while the
    /// datagram is delivered.
    pub(crate) fn members(&self, mgid: &[u8; 16]) -> KVec<u32> {
        let groups = self.groups.lock();
        let mut out = KVec::new();
        if let Some(g) = groups.iter().find(|g| g.mgid == *mgid) {
            // Bounded by `MAX_QPS_PER_GROUP`; on no memory the datagram
            // reaches no one, as a lost one would.
            let _ = out.extend_from_slice(&g.qpns, GFP_KERNEL);
        }
        out
    }
}
