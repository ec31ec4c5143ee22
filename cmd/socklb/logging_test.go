package main

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/socklb/socklb/pkg/logkey"
	"github.com/socklb/socklb/pkg/servicemap"
)

// logSample is run by TestLogging in a child process (logging can be set
// up once per process): socklb's slog lines and a klog line, as client-go
// writes them, through the agent's logging flags.
func logSample(args []string) {
	f, err := parseAgentFlags(args)
	if err != nil {
		panic(err)
	}
	log, flush, err := startLogging(f.logging)
	if err != nil {
		panic(err)
	}
	log.Info("datapath ready", "bpffs", "/sys/fs/bpf/socklb", "adopted_frontends", 4)
	badip := types.NamespacedName{Namespace: "default", Name: "badip"}
	log.Warn("skipping unusable input", logkey.Service(badip), "reason", `spec.externalIPs[0] "192.0.2.1" is refused`)
	fe := servicemap.FrontendKey{Addr: netip.MustParseAddr("10.96.0.40"), Port: 80, Proto: servicemap.TCP}
	log.Error("frontend not programmed; the rest of the node is", logkey.Frontend(fe), logkey.Service(badip), logkey.Map("backends"), "err", errors.New("backends map is full"))
	log.Debug("only at -v 4", "sockets_destroyed", 1)
	klog.InfoS("client-go says", "resource", "endpointslices")
	flush()
}

// TestLogging: socklb's own lines and klog's (client-go's) come out in one
// stream and one format, with socklb's keys kept; -v and
// --logging-format=json take effect; a Service is named as kube-proxy's
// klog.KObj names it in each format (package logkey).
func TestLogging(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SOCKLB_TEST_LOG_SAMPLE="+strings.Join(args, " "))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("logs went to stdout too, want one stream (stderr):\n%s", stdout.String())
		}
		return stderr.String()
	}

	text := run()
	for _, w := range []string{
		`] "datapath ready" bpffs="/sys/fs/bpf/socklb" adopted_frontends=4`,
		`W`, `"skipping unusable input" service="default/badip" reason="spec.externalIPs[0] \"192.0.2.1\" is refused"`,
		`"frontend not programmed; the rest of the node is" frontend="10.96.0.40:80/TCP" service="default/badip" map="backends" err="backends map is full"`,
		`] "client-go says" resource="endpointslices"`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("text log lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "only at -v 4") {
		t.Errorf("a debug line printed at -v 0:\n%s", text)
	}
	if v4 := run("-v", "4"); !strings.Contains(v4, `"only at -v 4" sockets_destroyed=1`) {
		t.Errorf("-v 4 does not print slog's debug lines:\n%s", v4)
	}

	js := run("--logging-format", "json")
	lines := strings.Split(strings.TrimSpace(js), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d JSON lines, want 4:\n%s", len(lines), js)
	}
	msgs := map[string]map[string]any{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		msgs[m["msg"].(string)] = m
	}
	if m := msgs["datapath ready"]; m == nil || m["adopted_frontends"] != float64(4) {
		t.Errorf("JSON: datapath ready %v", m)
	}
	// kube-proxy's "service" klog.KObj(svc) in JSON: an object, not a string.
	badip := map[string]any{"name": "badip", "namespace": "default"}
	if m := msgs["skipping unusable input"]; m == nil || !reflect.DeepEqual(m["service"], badip) {
		t.Errorf("JSON: skipping unusable input %v", m)
	}
	if m := msgs["frontend not programmed; the rest of the node is"]; m == nil || m["frontend"] != "10.96.0.40:80/TCP" ||
		!reflect.DeepEqual(m["service"], badip) || m["map"] != "backends" {
		t.Errorf("JSON: frontend not programmed %v", m)
	}
	if m := msgs["client-go says"]; m == nil || m["resource"] != "endpointslices" {
		t.Errorf("JSON: klog's line %v", m)
	}
}
