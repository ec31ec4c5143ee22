package main

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"
)

// TestFindPeer: /proc/net/tcp and tcp6 as the kernel writes them (IPv4 as
// one little-endian word, IPv6 as four), the established socket bound to
// the local address found and its remote decoded; a listener on the same
// port is not it.
func TestFindPeer(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A0F4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0200000A:A0F4 0301A8C0:192B 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: B80D0120000000000000000002000000:C350 B80D0120000000000000000009000000:01BB 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
`
	for _, c := range []struct {
		name, file, local string
		want              string // "" : not found
	}{
		{"IPv4 established", tcp, "10.0.0.2:41204", "192.168.1.3:6443"},
		{"IPv4 listener only", tcp, "127.0.0.1:41204", ""},
		{"IPv6", tcp6, "[2001:db8::2]:50000", "[2001:db8::9]:443"},
		{"absent", tcp6, "[2001:db8::3]:50000", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, found, err := findPeer(bufio.NewScanner(strings.NewReader(c.file)), netip.MustParseAddrPort(c.local))
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if found {
					t.Errorf("found %s, want nothing", got)
				}
				return
			}
			if !found || got != netip.MustParseAddrPort(c.want) {
				t.Errorf("got %s (found %v), want %s", got, found, c.want)
			}
		})
	}
}
