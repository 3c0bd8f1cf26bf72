// SPDX-License-Identifier: GPL-2.0
/*
 * spin_lock_bh() and friends for rust/kernel/spinlock_bh.rs: they are
 * inline functions, which Rust cannot call, and the kernel's Rust helpers
 * do not wrap them.
 */
#include "spinlock_bh.h"

void rust_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void rust_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

int rust_spin_trylock_bh(spinlock_t *lock)
{
	return spin_trylock_bh(lock);
}

/* Whether local interrupts are off; a _bh lock must not be taken then. */
bool rust_irqs_disabled(void)
{
	return irqs_disabled();
}
