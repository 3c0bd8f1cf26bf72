/* SPDX-License-Identifier: GPL-2.0 */
/* The C glue under rust/kernel/udp_tunnel.rs (see udp_tunnel.c). */
#ifndef RUST_HELPERS_UDP_TUNNEL_H
#define RUST_HELPERS_UDP_TUNNEL_H

#include <linux/skbuff.h>
#include <linux/types.h>

struct in6_addr;
struct net;

struct rust_udp_tunnel;

typedef void (*rust_udp_rcv_t)(const void *ctx, struct sk_buff *skb);

struct rust_udp_tunnel *rust_udp_tunnel_create(struct net *net, bool ipv6,
					       bool mc_loop, u16 port,
					       const void *ctx,
					       rust_udp_rcv_t rcv, int *err);
void rust_udp_tunnel_release(struct rust_udp_tunnel *t);
unsigned int rust_netdev_mtu(struct net *net, int ifindex);
int rust_ipv4_ifindex(struct net *net, __be32 addr);
struct sk_buff *rust_udp_tunnel_alloc4(struct rust_udp_tunnel *t, int oif,
				       __be32 saddr, __be32 daddr, u32 len,
				       u32 ip_len, u8 **data, int *err);
int rust_ipv6_ifindex(struct net *net, const struct in6_addr *addr);
struct sk_buff *rust_udp_tunnel_alloc6(struct rust_udp_tunnel *t, int oif,
				       const struct in6_addr *saddr,
				       const struct in6_addr *daddr, u32 len,
				       u32 ip_len, u8 **data, int *err);
int rust_udp_tunnel_xmit(struct rust_udp_tunnel *t, struct sk_buff *skb,
			 bool ipv6);
const u8 *rust_skb_network_bytes(struct sk_buff *skb, u32 *len);
int rust_skb_udp_bytes(const struct sk_buff *skb, u32 offset, void *to,
		       u32 len);
void rust_skb_free(struct sk_buff *skb, bool consumed);

#endif /* RUST_HELPERS_UDP_TUNNEL_H */
