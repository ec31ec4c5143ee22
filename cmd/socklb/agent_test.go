package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseAgentFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"manifests", []string{"--manifests", "examples", "--node-name", "n1"}, ""},
		{"both sources", []string{"--manifests", "d", "--kubeconfig", "k"}, "exclusive"},
		{"unknown flag", []string{"--frobnicate"}, "unknown flag: --frobnicate"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"zero capacity", []string{"--max-backends", "0"}, "--max-backends=0"},
		{"bad nodeport cidr", []string{"--nodeport-addresses", "10.0.0.0/8,nope"}, `"nope" is not a CIDR`},
		{"nodeport cidrs", []string{"--nodeport-addresses", "10.0.0.0/8, fd00::/64"}, ""},
		{"nodeport keywords", []string{"--nodeport-addresses", "primary,localhost,all,10.0.0.0/8"}, ""},
		{"profiling on loopback", []string{"--profiling"}, ""},
		{"profiling on loopback v6", []string{"--profiling", "--metrics-bind-address", "[::1]:10249"}, ""},
		{"profiling on all addresses", []string{"--profiling", "--metrics-bind-address", "0.0.0.0:10249"}, "--profiling on --metrics-bind-address 0.0.0.0:10249 would serve /debug/pprof/ without authentication"},
		{"profiling on an empty host", []string{"--profiling", "--metrics-bind-address", ":10249"}, "--profiling-allow-remote"},
		{"profiling on a node address", []string{"--profiling", "--metrics-bind-address", "192.0.2.1:10249"}, "--profiling-allow-remote"},
		{"profiling remote, explicitly", []string{"--profiling", "--profiling-allow-remote", "--metrics-bind-address", "0.0.0.0:10249"}, ""},
		{"external ip cidrs", []string{"--external-ip-cidrs", "203.0.113.0/24"}, ""},
		{"bad external ip cidr", []string{"--external-ip-cidrs", "203.0.113.1"}, `--external-ip-cidrs: "203.0.113.1" is not a CIDR`},
		{"packet path with devices", []string{"--packet-lb", "--devices", "eth0,eth1", "--nat-port-range", "40000-50000"}, ""},
		{"devices without the packet path", []string{"--devices", "eth0"}, "--devices eth0 is for --packet-lb, which is off"},
		{"nat ports reversed", []string{"--nat-port-range", "65000-61000"}, `--nat-port-range="65000-61000": want first-last`},
		{"nat ports privileged", []string{"--nat-port-range", "80-1000"}, "1024 <= first"},
		{"nat ports not a range", []string{"--nat-port-range", "61000"}, "want first-last"},
		{"zero flows", []string{"--max-flows", "0"}, "--max-flows=0"},
		{"bind address without a port", []string{"--healthz-bind-address", "127.0.0.1"}, `--healthz-bind-address="127.0.0.1": want IP:port`},
		{"bind address with a host name", []string{"--metrics-bind-address", "node-a:10249"}, `"node-a" is not an IP address`},
		{"bind address with a port name", []string{"--healthz-bind-address", "0.0.0.0:http"}, `port "http" is not a number`},
		{"bind address port out of range", []string{"--healthz-bind-address", "0.0.0.0:70000"}, `port "70000" is not a number from 0 to 65535`},
		{"bind addresses disabled", []string{"--healthz-bind-address=", "--metrics-bind-address="}, ""},
		{"bind address localhost", []string{"--metrics-bind-address", "localhost:0"}, ""},
		{"bad socket termination", []string{"--terminate-sockets", "tcp"}, `--terminate-sockets="tcp": use none, udp or all`},
		{"relative bpffs path", []string{"--bpffs-path", "socklb"}, `--bpffs-path="socklb": want an absolute directory`},
		{"relative cgroup path", []string{"--cgroup-path", "unified"}, `--cgroup-path="unified": want an absolute`},
		{"negative lock timeout", []string{"--lock-timeout", "-1s"}, "--lock-timeout=-1s: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseAgentFlags(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				given := func(flag string) bool {
					return slices.ContainsFunc(tc.args, func(a string) bool { return strings.HasPrefix(a, flag) })
				}
				if f.nodeName == "" || f.bpffsPath != defaultBPFFS || (f.healthzAddr != "0.0.0.0:10256" && !given("--healthz-bind-address")) ||
					(f.metricsAddr != "127.0.0.1:10249" && !given("--metrics-bind-address")) {
					t.Fatalf("defaults not kube-proxy's: %+v", f)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseNodePortAddresses: keywords and CIDRs as kube-proxy v1.37
// validates (pkg/proxy/apis/config/validation) and expands
// (expandNodePortAddressKeywords, cmd/kube-proxy/app/server.go) them.
func TestParseNodePortAddresses(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		primary  bool
		wantErr  string
	}{
		{in: "10.1.2.3/8,,fd00::1/64", want: "10.0.0.0/8 fd00::/64"},
		{in: "primary", want: "", primary: true},
		{in: "localhost", want: "127.0.0.0/8 ::1/128"},
		{in: "all", want: "0.0.0.0/0 ::/0"},
		{in: "primary, localhost,10.0.0.0/8", want: "127.0.0.0/8 ::1/128 10.0.0.0/8", primary: true},
		{in: "primary,primary", wantErr: `keyword "primary" appears twice`},
		{in: "Primary", wantErr: `"Primary" is not a CIDR or one of the keywords`},
		{in: "10.0.0.1", wantErr: `"10.0.0.1" is not a CIDR`},
	} {
		got, err := parseNodePortAddresses(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		var ps []string
		for _, p := range got.prefixes {
			ps = append(ps, p.String())
		}
		if strings.Join(ps, " ") != tc.want || got.primary != tc.primary {
			t.Errorf("%q: prefixes %v primary %t, want %q primary %t", tc.in, ps, got.primary, tc.want, tc.primary)
		}
	}
}
