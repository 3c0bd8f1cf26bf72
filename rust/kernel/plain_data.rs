// SPDX-License-Identifier: GPL-2.0

//! Plain-data structures: `FromBytes` and `AsBytes` without `unsafe` at the
//! use site.
//!
//! Memory shared with a device (a descriptor ring in coherent DMA memory)
//! is typed by structures of integers. [`impl_plain_data!`] implements
//! [`FromBytes`] and [`AsBytes`] for such a structure after checking, at
//! compile time, what makes that sound: the fields it lists are all the
//! structure's fields, each of them is itself plain data, and their sizes
//! add up to the structure's, so there is no padding.
//!
//! [`FromBytes`]: kernel::transmute::FromBytes
//! [`AsBytes`]: kernel::transmute::AsBytes

/// Implements `FromBytes` and `AsBytes` for the structure `$t`, whose
/// fields (all of them, with their types) are listed.
///
/// ```ignore
/// #[repr(C)]
/// struct Desc { flags: u32, addr: u64, len: u32, pad: u32 }
/// impl_plain_data!(Desc { flags: u32, addr: u64, len: u32, pad: u32 });
/// ```
macro_rules! impl_plain_data {
    ($t:ident { $($field:ident : $ft:ty),+ $(,)? }) => {
        const _: () = {
            const fn plain<T: kernel::transmute::FromBytes + kernel::transmute::AsBytes>() {}
            $(plain::<$ft>();)+
            // Names every field and no other: fails to build otherwise.
            #[allow(dead_code)]
            fn fields(v: $t) {
                let $t { $($field),+ } = v;
                $(let _: $ft = $field;)+
            }
            assert!(
                core::mem::size_of::<$t>() == 0 $(+ core::mem::size_of::<$ft>())+,
                "the structure has padding"
            );
        };
        // SAFETY: Checked above: every field is `FromBytes`, so every bit
        // pattern of the structure is valid.
        unsafe impl kernel::transmute::FromBytes for $t {}
        // SAFETY: Checked above: every field is `AsBytes` (initialised, no
        // interior mutability) and the fields fill the structure, so no
        // byte of it is padding.
        unsafe impl kernel::transmute::AsBytes for $t {}
    };
}
pub(crate) use impl_plain_data;
