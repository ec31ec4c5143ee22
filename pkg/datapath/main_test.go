package datapath

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// udpSenderEnv makes the test binary a UDP sender (udpSenderIn) instead
// of running the tests: its value is the addresses to send to.
const udpSenderEnv = "SOCKLB_TEST_UDP_SENDER"

func TestMain(m *testing.M) {
	if addrs, ok := os.LookupEnv(udpSenderEnv); ok {
		if err := udpSender(strings.Split(addrs, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "udp sender:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// udpSender sends one datagram to each IPv4 address from one unconnected
// socket, prints the socket's descriptor and keeps it until stdin closes.
func udpSender(addrs []string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return err
		}
		if err := unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
			return fmt.Errorf("sendto %s: %w", a, err)
		}
	}
	fmt.Println(fd)
	_, err = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return err
}
