package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/socklb/socklb/pkg/datapath"
)

func TestSocketStateCollector(t *testing.T) {
	m := testMetrics()
	ev, fail := datapath.SocketStateEvents{Evicted: 3, NoState: 1}, false
	if err := m.collectSocketState(func() (datapath.SocketStateEvents, error) {
		if fail {
			return datapath.SocketStateEvents{}, errors.New("map gone")
		}
		return ev, nil
	}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP socklb_socket_state_evictions_total Per-socket entries overwritten because a socket sent to more than 4 Service ports: replies from the dropped port's backend show the pod address.
# TYPE socklb_socket_state_evictions_total counter
socklb_socket_state_evictions_total 3
# HELP socklb_socket_state_failures_total Translations for which the kernel could not allocate the socket's storage (memory): nothing about the socket was kept.
# TYPE socklb_socket_state_failures_total counter
socklb_socket_state_failures_total 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"socklb_socket_state_evictions_total", "socklb_socket_state_failures_total"); err != nil {
		t.Fatal(err)
	}
	fail = true
	if n, err := testutil.GatherAndCount(m.Registry, "socklb_socket_state_evictions_total"); err != nil || n != 0 {
		t.Fatalf("a failed read still exported %d series (%v)", n, err)
	}
}
