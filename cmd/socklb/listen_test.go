package main

import (
	"net"
	"strings"
	"testing"
)

// TestBindListenersClosesOnFailure: when the second port is taken, the
// first one, bound already, is closed again (the start fails, nobody will
// serve it); Close frees both once nothing serves them.
func TestBindListenersClosesOnFailure(t *testing.T) {
	freeAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	healthz := freeAddr()
	if _, err := bindListeners(healthz, taken.Addr().String()); err == nil || !strings.Contains(err.Error(), "--metrics-bind-address") {
		t.Fatalf("metrics on a taken port: %v, want an error naming --metrics-bind-address", err)
	}
	ln, err := net.Listen("tcp", healthz)
	if err != nil {
		t.Fatalf("--healthz-bind-address %s stayed bound after the start failed: %v", healthz, err)
	}
	ln.Close()

	metrics := freeAddr()
	l, err := bindListeners(healthz, metrics)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, addr := range []string{healthz, metrics} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s stayed bound after Close: %v", addr, err)
		}
		ln.Close()
	}
}
