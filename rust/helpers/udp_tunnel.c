// SPDX-License-Identifier: GPL-2.0
/*
 * Thin C glue under rust/kernel/udp_tunnel.rs: a kernel UDP socket whose
 * datagrams go to a Rust receiver (the encap_rcv hook of a UDP tunnel
 * socket, as rdma_rxe and the VXLAN driver use), and IPv4 or IPv6
 * datagrams built whole by Rust, sent with ip_local_out() or
 * ip6_local_out() on a route looked up here.
 *
 * udp_sock_create(), ip_route_output_key(), ip6_dst_lookup_flow() (for a
 * kernel without IPv6), skb_linearize() and the skb header accessors are
 * inline functions or macros, which Rust cannot call.
 * Nothing is decided here: which port, which addresses, what the headers
 * say and what a received datagram means are all the caller's.
 */

#include <linux/inetdevice.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/udp_tunnel.h>

#include "udp_tunnel.h"

struct rust_udp_tunnel {
	struct socket *sock;
	const void *ctx;
	rust_udp_rcv_t rcv;
};

/*
 * Softirq, under RCU: the socket's user data is the tunnel until
 * rust_udp_tunnel_release() clears it and waits for a grace period.
 */
static int rust_udp_tunnel_encap_rcv(struct sock *sk, struct sk_buff *skb)
{
	struct rust_udp_tunnel *t = rcu_dereference_sk_user_data(sk);

	if (!t) {
		kfree_skb(skb);
		return 0;
	}
	/*
	 * The receiver may keep the skb past this RCU section: a
	 * reference-less route must not go with it.
	 */
	skb_dst_drop(skb);
	t->rcv(t->ctx, skb);
	return 0;
}

/*
 * A UDP socket of namespace @net bound to @port (host order) on every
 * address of its family (@ipv6: IPv6 only, else IPv4), whose datagrams are
 * handed to @rcv with @ctx, in softirq context; the receiver owns each
 * skb.  An IPv6 socket takes datagrams without a UDP checksum, as RoCEv2
 * sends them.  With @mc_loop, what the socket sends to a multicast group
 * this host is a member of is also delivered here.  NULL with *err set on
 * failure (-EADDRINUSE when another stack has the port, -EAFNOSUPPORT
 * without IPv6).  The caller holds a
 * reference on @net for as long as the socket is open: a kernel socket
 * holds none.
 */
struct rust_udp_tunnel *rust_udp_tunnel_create(struct net *net, bool ipv6,
					       bool mc_loop, u16 port,
					       const void *ctx,
					       rust_udp_rcv_t rcv, int *err)
{
	struct udp_port_cfg ucfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.ipv6_v6only = ipv6,
		.local_udp_port = htons(port),
	};
	struct udp_tunnel_sock_cfg tcfg = {
		.encap_type = 1,
		.encap_rcv = rust_udp_tunnel_encap_rcv,
	};
	struct rust_udp_tunnel *t;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		*err = -ENOMEM;
		return NULL;
	}
	t->ctx = ctx;
	t->rcv = rcv;
	*err = udp_sock_create(net, &ucfg, &t->sock);
	if (*err) {
		kfree(t);
		return NULL;
	}
	tcfg.sk_user_data = t;
	setup_udp_tunnel_sock(net, t->sock->sk, &tcfg);
	/* The setup turns multicast loopback off; the caller says. */
	if (ipv6)
		inet6_assign_bit(MC6_LOOP, t->sock->sk, mc_loop);
	else
		inet_assign_bit(MC_LOOP, t->sock->sk, mc_loop);
	return t;
}

/*
 * Closes the socket; once this returns no receive callback runs or will
 * run.
 */
void rust_udp_tunnel_release(struct rust_udp_tunnel *t)
{
	udp_tunnel_sock_release(t->sock->sk);
	/* A callback that read the user data before it was cleared ends. */
	synchronize_rcu();
	kfree(t);
}

/* The index of the netdev of @net that has IPv4 address @addr; 0 if none. */
int rust_ipv4_ifindex(struct net *net, __be32 addr)
{
	struct net_device *dev;
	int ifindex = 0;

	rcu_read_lock();
	dev = __ip_dev_find(net, addr, false);
	if (dev)
		ifindex = dev->ifindex;
	rcu_read_unlock();
	return ifindex;
}

/* The MTU of @net's netdev of index @ifindex; 0 if none. */
unsigned int rust_netdev_mtu(struct net *net, int ifindex)
{
	struct net_device *ndev;
	unsigned int mtu = 0;

	rcu_read_lock();
	ndev = dev_get_by_index_rcu(net, ifindex);
	if (ndev)
		mtu = READ_ONCE(ndev->mtu);
	rcu_read_unlock();
	return mtu;
}

/*
 * An skb for an IPv4 datagram of @len bytes from @saddr to @daddr (network
 * order) out of the netdev of index @oif (0: any), routed and with room for
 * the link-layer header: *data points at its @len bytes, which the caller
 * fills from the IP header on; the transport header is @ip_len bytes in.
 * NULL with *err set if there is no route or no memory.  Process context.
 */
struct sk_buff *rust_udp_tunnel_alloc4(struct rust_udp_tunnel *t, int oif,
				       __be32 saddr, __be32 daddr, u32 len,
				       u32 ip_len, u8 **data, int *err)
{
	struct flowi4 fl = {
		.flowi4_oif = oif,
		.flowi4_proto = IPPROTO_UDP,
		.saddr = saddr,
		.daddr = daddr,
	};
	struct net_device *dev;
	struct sk_buff *skb;
	struct rtable *rt;

	rt = ip_route_output_key(sock_net(t->sock->sk), &fl);
	if (IS_ERR(rt)) {
		*err = PTR_ERR(rt);
		return NULL;
	}
	dev = rt->dst.dev;
	skb = alloc_skb(len + LL_RESERVED_SPACE(dev), GFP_KERNEL);
	if (!skb) {
		ip_rt_put(rt);
		*err = -ENOMEM;
		return NULL;
	}
	skb_reserve(skb, LL_RESERVED_SPACE(dev));
	skb_dst_set(skb, &rt->dst);
	skb->dev = dev;
	skb->protocol = htons(ETH_P_IP);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, ip_len);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	return skb;
}

/* The index of the netdev of @net that has IPv6 address @addr; 0 if none. */
int rust_ipv6_ifindex(struct net *net, const struct in6_addr *addr)
{
	int ifindex = 0;
#if IS_ENABLED(CONFIG_IPV6)
	struct net_device *dev;

	rcu_read_lock();
	dev = ipv6_dev_find(net, addr, NULL);
	if (dev)
		ifindex = dev->ifindex;
	rcu_read_unlock();
#endif
	return ifindex;
}

/*
 * As rust_udp_tunnel_alloc4(), for an IPv6 datagram from @saddr to @daddr
 * on an IPv6 tunnel; -EAFNOSUPPORT without IPv6.
 */
struct sk_buff *rust_udp_tunnel_alloc6(struct rust_udp_tunnel *t, int oif,
				       const struct in6_addr *saddr,
				       const struct in6_addr *daddr, u32 len,
				       u32 ip_len, u8 **data, int *err)
{
#if IS_ENABLED(CONFIG_IPV6)
	struct flowi6 fl6 = {
		.flowi6_oif = oif,
		.flowi6_proto = IPPROTO_UDP,
		.saddr = *saddr,
		.daddr = *daddr,
	};
	struct sock *sk = t->sock->sk;
	struct dst_entry *dst;
	struct net_device *dev;
	struct sk_buff *skb;

	dst = ip6_dst_lookup_flow(sock_net(sk), sk, &fl6, NULL);
	if (IS_ERR(dst)) {
		*err = PTR_ERR(dst);
		return NULL;
	}
	if (dst->error) {
		*err = dst->error;
		dst_release(dst);
		return NULL;
	}
	dev = dst->dev;
	skb = alloc_skb(len + LL_RESERVED_SPACE(dev), GFP_KERNEL);
	if (!skb) {
		dst_release(dst);
		*err = -ENOMEM;
		return NULL;
	}
	skb_reserve(skb, LL_RESERVED_SPACE(dev));
	skb_dst_set(skb, dst);
	skb->dev = dev;
	skb->protocol = htons(ETH_P_IPV6);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, ip_len);
	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	return skb;
#else
	*err = -EAFNOSUPPORT;
	return NULL;
#endif
}

/*
 * Sends an skb of rust_udp_tunnel_alloc4() (@ipv6 false) or _alloc6();
 * consumes it in every case.
 */
int rust_udp_tunnel_xmit(struct rust_udp_tunnel *t, struct sk_buff *skb,
			 bool ipv6)
{
	struct sock *sk = t->sock->sk;

#if IS_ENABLED(CONFIG_IPV6)
	if (ipv6)
		return ip6_local_out(sock_net(sk), sk, skb);
#endif
	if (ipv6) {
		kfree_skb(skb);
		return -EAFNOSUPPORT;
	}
	return ip_local_out(sock_net(sk), sk, skb);
}

/*
 * The bytes of a received skb from its network header to its end, made
 * linear first: NULL if that fails.
 */
const u8 *rust_skb_network_bytes(struct sk_buff *skb, u32 *len)
{
	if (skb_linearize(skb))
		return NULL;
	*len = skb_tail_pointer(skb) - skb_network_header(skb);
	return skb_network_header(skb);
}

/*
 * Copies @len bytes of @skb from @offset past the start of its UDP header
 * into @to, linear or not: 0, or -EFAULT when the skb is shorter.
 */
int rust_skb_udp_bytes(const struct sk_buff *skb, u32 offset, void *to,
		       u32 len)
{
	return skb_copy_bits(skb, skb_transport_offset(skb) + offset, to, len);
}

/* Frees @skb: dropped (counted as a drop), or consumed (delivered). */
void rust_skb_free(struct sk_buff *skb, bool consumed)
{
	if (consumed)
		consume_skb(skb);
	else
		kfree_skb(skb);
}
