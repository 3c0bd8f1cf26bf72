// SPDX-License-Identifier: GPL-2.0

//! Test-only module that proves the bench's splat detector is real.
//!
//! Loading it with `fire=1` raises a kernel `WARNING`, which every guest run
//! must treat as a failure. Loaded without the parameter it does nothing.

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
    },
}

struct SplatTrigger;

impl kernel::Module for SplatTrigger {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let fire = module_parameters::fire.value();
        pr_info!("loaded (fire={})\n", fire);
        kernel::warn_on!(fire);
        Ok(SplatTrigger)
    }
}
