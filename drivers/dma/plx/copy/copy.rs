// SPDX-License-Identifier: GPL-2.0

//! `/dev/plx-dma-copy`: user-buffer copies through a dmaengine memcpy
//! channel.
//!
//! A dmaengine *client*: each open file takes one memcpy channel (any, or
//! one by name) for itself, from any provider whose channels can be
//! terminated (`rust_plx_dma`, not the C `plx_dma`). Channels are a scarce
//! system resource held exclusively, so only a file opened with
//! `CAP_SYS_RAWIO` may take one. User buffers are pinned, mapped through the DMA API (and so
//! the IOMMU), split into descriptors at segment boundaries and copied by
//! the engine; see `include/uapi/linux/plx_dma_copy.h` and
//! `Documentation/userspace-api/plx_dma_copy.rst`.

// The abstractions are shared source, written with the visibility they
// would have in `rust/kernel`; this module uses part of them.
#[expect(unreachable_pub)]
#[path = "../../../../rust/kernel/capability.rs"]
mod capability;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../rust/kernel/module_queue.rs"]
mod module_queue;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/user_pages.rs"]
mod user_pages;

mod abi;
mod file;
mod job;
mod pins;
mod region;
mod tracker;
mod turn;

use capability::Capability;
use file::CopyFile;
use job::Limits;
use kernel::{
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    sync::{Arc, ArcBorrow},
};

module! {
    type: PlxDmaCopy,
    name: "plx_dma_copy",
    authors: ["rust-plx-dma developers"],
    description: "User-buffer copies through dmaengine memcpy channels",
    license: "GPL v2",
    params: {
        max_pinned_pages: u32 {
            default: 65536,
            description: "User pages all open files may pin at once (1..16777216)",
        },
    },
}

/// Bound of `max_pinned_pages`: 64 GiB of 4 KiB pages.
const MAX_PINNED_PAGES: u32 = 1 << 24;

#[pin_data]
struct PlxDmaCopy {
    #[pin]
    _misc: MiscDeviceRegistration<CopyDevice>,
}

impl kernel::InPlaceModule for PlxDmaCopy {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let pages = module_parameters::max_pinned_pages.value();
        let ok = (1..=MAX_PINNED_PAGES).contains(&pages);
        if !ok {
            pr_err!(
                "max_pinned_pages={} is invalid: use 1 to {}\n",
                pages,
                MAX_PINNED_PAGES
            );
        }
        let options = MiscDeviceOptions {
            name: c"plx-dma-copy",
        };
        try_pin_init!(Self {
            _misc <- {
                if !ok {
                    return Err(EINVAL);
                }
                MiscDeviceRegistration::register(options)
            },
        })
    }
}

/// The misc device's file operations.
struct CopyDevice;

#[vtable]
impl MiscDevice for CopyDevice {
    type Ptr = Arc<CopyFile>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Self::Ptr> {
        CopyFile::new(
            Limits {
                max_len: file::MAX_LEN,
                max_pinned_pages: u64::from(module_parameters::max_pinned_pages.value()),
            },
            capability::file_capable(file, Capability::SysRawio),
        )
    }

    fn release(me: Arc<CopyFile>, _file: &File) {
        me.close();
    }

    fn ioctl(me: ArcBorrow<'_, CopyFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        CopyFile::ioctl(me, cmd, arg)
    }
}
