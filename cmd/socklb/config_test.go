package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigFile: every flag can come from --config, a flag given on the
// command line wins over the file, and a file socklb cannot fully
// understand is refused naming what is wrong.
func TestConfigFile(t *testing.T) {
	const header = "apiVersion: socklb.io/v1alpha1\nkind: SocklbConfiguration\n"
	full := header + `manifests: /etc/socklb/manifests
nodeName: node-a
cgroupPath: /run/socklb/cgroupv2
bpffsPath: /sys/fs/bpf/other
maxServices: 1000
maxBackends: 2000
maxAffinity: 3000
socketLBHostNSOnly: true
terminateSockets: all
disableKernelFeatures: [sock_destroy]
nodePortAddresses: [primary, 10.0.0.0/8]
lockTimeout: 5s
pinCheckInterval: 1m
healthzBindAddress: 127.0.0.1:20256
healthzTimeout: 30s
metricsBindAddress: 127.0.0.1:20249
perServiceMetrics: true
externalIPCIDRs: [203.0.113.0/24]
profiling: true
logging:
  format: json
  verbosity: 4
`
	for _, tc := range []struct {
		name    string
		file    string
		args    []string
		check   func(t *testing.T, f agentFlags)
		wantErr []string
	}{
		{name: "file only", file: full, check: func(t *testing.T, f agentFlags) {
			if f.manifests != "/etc/socklb/manifests" || f.nodeName != "node-a" || f.cgroupPath != "/run/socklb/cgroupv2" || f.bpffsPath != "/sys/fs/bpf/other" ||
				f.maxServices != 1000 || f.maxBackends != 2000 || f.maxAffinity != 3000 || !f.hostNSOnly || f.terminateSockets != "all" ||
				len(f.disableFeatures) != 1 || !f.nodePortAddresses.primary || len(f.nodePortAddresses.prefixes) != 1 ||
				f.lockTimeout != 5*time.Second || f.pinCheckInterval != time.Minute || f.healthzAddr != "127.0.0.1:20256" ||
				f.healthTimeout != 30*time.Second || f.metricsAddr != "127.0.0.1:20249" || !f.perServiceMetrics ||
				len(f.externalIPCIDRs) != 1 || !f.profiling || f.logging.Format != "json" || f.logging.Verbosity != 4 {
				t.Errorf("the file's values were not all taken: %+v", f)
			}
		}},
		{name: "defaults under a partial file", file: header + "maxBackends: 2000\n", check: func(t *testing.T, f agentFlags) {
			if f.maxBackends != 2000 || f.maxServices != 262144 || f.bpffsPath != defaultBPFFS || f.healthzAddr != "0.0.0.0:10256" || f.logging.Format != "text" {
				t.Errorf("defaults lost under a partial file: %+v", f)
			}
		}},
		{name: "flags override the file", file: full,
			args: []string{"--max-backends", "42", "--nodeport-addresses", "localhost", "--lock-timeout", "2s", "--profiling=false", "-v", "1", "--logging-format", "text"},
			check: func(t *testing.T, f agentFlags) {
				if f.maxBackends != 42 || f.nodePortAddresses.primary || len(f.nodePortAddresses.prefixes) != 2 || f.lockTimeout != 2*time.Second ||
					f.profiling || f.logging.Verbosity != 1 || f.logging.Format != "text" {
					t.Errorf("flags did not override the file: %+v", f)
				}
				if f.maxServices != 1000 || f.manifests != "/etc/socklb/manifests" {
					t.Errorf("fields no flag set lost the file's value: %+v", f)
				}
			}},
		{name: "flag order does not matter", file: header + "maxBackends: 2000\n", args: []string{"--max-backends", "7", "--config"},
			check: func(t *testing.T, f agentFlags) {
				if f.maxBackends != 7 {
					t.Errorf("--max-backends before --config lost to the file: %d", f.maxBackends)
				}
			}},
		{name: "unknown field", file: header + "maxBackend: 2000\n", wantErr: []string{`unknown field "maxBackend"`, "--write-config-to"}},
		{name: "duplicate field", file: header + "maxBackends: 1000\nmaxServices: 10\nmaxBackends: 2000\n",
			wantErr: []string{`line 5: "maxBackends" is given twice (first at line 3): keep one`}},
		{name: "duplicate nested field", file: header + "logging:\n  format: json\n  format: text\n",
			wantErr: []string{`line 5: "logging.format" is given twice (first at line 4)`}},
		{name: "unknown nested field", file: header + "logging:\n  formatt: json\n", wantErr: []string{`unknown field "logging.formatt"`}},
		{name: "wrong apiVersion", file: "apiVersion: socklb.io/v1\nkind: SocklbConfiguration\n", wantErr: []string{`apiVersion "socklb.io/v1"`, "want apiVersion: socklb.io/v1alpha1"}},
		{name: "wrong kind", file: "apiVersion: socklb.io/v1alpha1\nkind: KubeProxyConfiguration\n", wantErr: []string{`kind "KubeProxyConfiguration"`, "kind: SocklbConfiguration"}},
		{name: "no TypeMeta", file: "maxBackends: 2000\n", wantErr: []string{`apiVersion ""`}},
		{name: "invalid value in the file", file: header + "maxServices: 0\n", wantErr: []string{"--max-services=0"}},
		{name: "both sources, one from the file", file: header + "manifests: /m\n", args: []string{"--kubeconfig", "k"}, wantErr: []string{"exclusive"}},
		{name: "not YAML", file: header + "maxBackends: [\n", wantErr: []string{"--config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "socklb.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			args := tc.args
			if len(args) > 0 && args[len(args)-1] == "--config" {
				args = append(args, path)
			} else {
				args = append([]string{"--config", path}, args...)
			}
			f, err := parseAgentFlags(args)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one containing %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
	if _, err := parseAgentFlags([]string{"--config", "/nonexistent/socklb.yaml"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/socklb.yaml") {
		t.Errorf("missing file: error %v, want one naming it", err)
	}
}
