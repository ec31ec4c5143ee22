/* IPv4 addresses travel as IPv4-mapped IPv6 (::ffff:a.b.c.d) inside socklb,
 * matching how the maps store them. */
#ifndef SOCKLB_ADDR_H
#define SOCKLB_ADDR_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

/* A 16-byte address as a global function's argument: the verifier sizes a
 * pointer argument by its type, and a __u8 * is one byte. */
struct addr16 {
	__u8 b[16];
};

#define A16(x) ((const struct addr16 *)(x))

static __always_inline void addr_from_v4(__u8 addr[16], __u32 ip4)
{
	__u32 *w = (__u32 *)addr;

	w[0] = 0;
	w[1] = 0;
	w[2] = bpf_htonl(0x0000ffff);
	w[3] = ip4;
}

static __always_inline __u32 addr_to_v4(const __u8 addr[16])
{
	return ((const __u32 *)addr)[3];
}

static __always_inline int addr_is_v4(const __u8 addr[16])
{
	const __u32 *w = (const __u32 *)addr;

	return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int addr_eq(const __u8 a[16], const __u8 b[16])
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/* addr_is_unset reports an address never written: all zero, or the
 * v4-mapped 0.0.0.0. */
static __always_inline int addr_is_unset(const __u8 a[16])
{
	const __u32 *w = (const __u32 *)a;

	return w[3] == 0 && w[0] == 0 && w[1] == 0 && (w[2] == 0 || w[2] == bpf_htonl(0x0000ffff));
}

#endif
