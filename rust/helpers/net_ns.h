/* SPDX-License-Identifier: GPL-2.0 */
/* The C glue under rust/kernel/net_ns.rs (see net_ns.c). */
#ifndef RUST_HELPERS_NET_NS_H
#define RUST_HELPERS_NET_NS_H

struct net;

struct net *rust_net_get(struct net *net);
struct net *rust_net_get_init(void);
void rust_net_put(struct net *net);

#endif /* RUST_HELPERS_NET_NS_H */
