/* SPDX-License-Identifier: GPL-2.0 */
/* The C side of rust/kernel/spinlock_bh.rs. */
#ifndef RUST_HELPERS_SPINLOCK_BH_H
#define RUST_HELPERS_SPINLOCK_BH_H

#include <linux/spinlock.h>

void rust_spin_lock_bh(spinlock_t *lock);
void rust_spin_unlock_bh(spinlock_t *lock);
int rust_spin_trylock_bh(spinlock_t *lock);
bool rust_irqs_disabled(void);

#endif /* RUST_HELPERS_SPINLOCK_BH_H */
