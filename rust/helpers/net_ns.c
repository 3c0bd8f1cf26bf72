// SPDX-License-Identifier: GPL-2.0
/*
 * Counted references on network namespaces for rust/kernel/net_ns.rs:
 * get_net() and put_net() are inline functions, and init_net a variable
 * Rust does not reach.
 */
#include <net/net_namespace.h>

#include "net_ns.h"

/* A reference on @net, which the caller holds one on (or borrows). */
struct net *rust_net_get(struct net *net)
{
	return get_net(net);
}

/* A reference on the initial namespace. */
struct net *rust_net_get_init(void)
{
	return get_net(&init_net);
}

void rust_net_put(struct net *net)
{
	put_net(net);
}
