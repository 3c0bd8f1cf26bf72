// SPDX-License-Identifier: GPL-2.0

//! Test-only module that proves the bench's splat detector is real.
//!
//! Loading it with `fire=1` raises a kernel `WARNING`, and with `leak=1` it
//! leaks allocations for kmemleak to report; every guest run must treat
//! either as a failure. Loaded without parameters it does nothing.

use kernel::prelude::*;

module! {
    type: SplatTrigger,
    name: "splat_trigger",
    authors: ["rust-plx-dma developers"],
    description: "Fires a WARN_ON on request, to test splat detection",
    license: "GPL",
    params: {
        fire: bool {
            default: false,
            description: "Raise a WARNING when the module loads",
        },
        leak: bool {
            default: false,
            description: "Leak eight blocks of 1 KiB when the module loads",
        },
    },
}

/// How many blocks `leak=1` leaks.
const LEAKED_BLOCKS: usize = 8;

struct SplatTrigger;

impl kernel::Module for SplatTrigger {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let fire = module_parameters::fire.value();
        let leak = module_parameters::leak.value();
        pr_info!("loaded (fire={}, leak={})\n", fire, leak);
        kernel::warn_on!(fire);
        if leak {
            // Nothing keeps the addresses. The last one may survive in a
            // stale stack slot (the freed stack of this task is cached for
            // the next), and kmemleak takes that as a reference; each
            // earlier one has been overwritten by the next iteration.
            for _ in 0..LEAKED_BLOCKS {
                KBox::leak(KBox::new([0x5au8; 1024], GFP_KERNEL)?);
            }
        }
        Ok(SplatTrigger)
    }
}
