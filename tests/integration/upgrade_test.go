package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

var (
	layoutOnce sync.Once
	layoutBin  string
	layoutErr  error
)

// layoutChangedBin is socklb built with the test-only ldflag that renames
// the value type of every state map (pkg/datapath/layout.go). The tree has
// one generated BPF object, so a real maps.h change would need a second
// copy of it; the rename is a change of the maps' BTF with the same sizes,
// which the agent must notice, and it makes every map of the new binary
// incompatible with the old one's: the worst case, where nothing is kept
// or copied and everything is refilled from the API.
func layoutChangedBin(t *testing.T) string {
	t.Helper()
	layoutOnce.Do(func() {
		root, err := testkit.ModuleRoot()
		if err != nil {
			layoutErr = err
			return
		}
		bin := filepath.Join(filepath.Dir(socklbBin), "socklb-layout2")
		build := exec.Command("go", "build", "-o", bin,
			"-ldflags", "-X github.com/socklb/socklb/pkg/datapath.testLayoutChange=1", "./cmd/socklb")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			layoutErr = fmt.Errorf("building socklb with a changed map layout: %v\n%s", err, out)
			return
		}
		layoutBin = bin
	})
	if layoutErr != nil {
		t.Fatal(layoutErr)
	}
	return layoutBin
}

// unversionedCommit is the last commit whose agent pins its maps straight
// under <bpffs>/maps, before layout versions.
const unversionedCommit = "3342bc3"

// unversionedBin builds the agent of unversionedCommit: the real previous
// release, not a simulation of it. Its source comes from testdata, not
// from git, so that a shallow clone runs this test too:
// testdata/socklb-<commit>.tar.gz is
// `git archive --format=tar <commit> -- cmd pkg bpf go.mod go.sum | gzip -9n`,
// and TestUnversionedSourceIsThatCommit holds it to the commit.
func unversionedBin(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("tar", "-xzf", unversionedArchive, "-C", src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v: %s", unversionedArchive, err, out)
	}
	bin := filepath.Join(filepath.Dir(socklbBin), "socklb-unversioned")
	build := exec.Command("go", "build", "-o", bin, "./cmd/socklb")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building socklb at %s: %v\n%s", unversionedCommit, err, out)
	}
	return bin
}

var unversionedArchive = filepath.Join("testdata", "socklb-"+unversionedCommit+".tar.gz")

// TestUnversionedSourceIsThatCommit: the archive the upgrade and rollback
// tests build is byte for byte what git archives of unversionedCommit.
func TestUnversionedSourceIsThatCommit(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := exec.Command("git", "archive", "--format=tar", unversionedCommit, "--", "cmd", "pkg", "bpf", "go.mod", "go.sum")
	want.Dir = root
	tarball, err := want.Output()
	if err != nil {
		t.Skipf("commit %s is not in this checkout (%v, a shallow clone?): the archive's provenance cannot be checked here", unversionedCommit, err)
	}
	got, err := exec.Command("sh", "-c", "gzip -dc "+unversionedArchive).Output()
	if err != nil {
		t.Fatalf("reading %s: %v", unversionedArchive, err)
	}
	if !bytes.Equal(got, tarball) {
		t.Fatalf("%s is not `git archive %s` (%d bytes, git gives %d): rebuild it with the command in unversionedBin's comment", unversionedArchive, unversionedCommit, len(got), len(tarball))
	}
}

// TestUpgradeFromUnversionedPins: an agent of the release before
// versioned pins serves; the new agent takes its maps over (same layout:
// the same kernel objects, pinned in a versioned directory) under a
// connect loop with 0 failed connects, and removes the old pins.
func TestUpgradeFromUnversionedPins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, a cgroup and BPF pins (CI runs this as root)")
	}
	old := unversionedBin(t)
	e := newEnv(t, threePods...)
	e.writeManifest("echo.yaml", serviceYAML("echo", vip, ready("10.244.1.11", "10.244.1.12", "10.244.1.13")...))
	e.startAgentBin(old)
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.13:8080")
	legacy := filepath.Join(e.fs.Path(), "maps")
	if _, err := os.Stat(filepath.Join(legacy, "services")); err != nil {
		t.Fatalf("the agent of %s did not pin its maps straight under %s: %v", unversionedCommit, legacy, err)
	}
	progs := map[int]bool{}
	links, _ := os.ReadDir(filepath.Join(e.fs.Path(), "links"))
	for _, l := range links {
		var li struct {
			ProgID int `json:"prog_id"`
		}
		if err := bpftoolJSON(&li, "link", "show", "pinned", filepath.Join(e.fs.Path(), "links", l.Name())); err != nil {
			t.Fatal(err)
		}
		progs[li.ProgID] = true
	}
	upgradeFromUnderLoad(t, e, served{gen: legacy, progs: progs}, []upgradeStep{{name: "from unversioned pins", bin: socklbBin}})
}

type upgradeStep struct {
	name string
	bin  string
	args []string
	// carries: the step moves sk_state into a new map; its agent must
	// log carrying at least this many sockets.
	carries int
}

// TestUpgradeSizesUnderLoad: restarting the agent with larger --max-*
// flags, and back, under a connect loop fails no connect, moves the maps
// to a new generation and leaves no old pin. The socket storage map is
// the same object across a size change, so an unconnected UDP socket that
// sends all along keeps its pod and sees every reply come from the
// ClusterIP.
func TestUpgradeSizesUnderLoad(t *testing.T) {
	e := startEcho(t)
	udp := startUDP(t, e, "udp")
	upgradeUnderLoad(t, e, []upgradeStep{
		{name: "larger maps", bin: socklbBin, args: []string{"--max-services", "4096", "--max-backends", "8192", "--max-affinity", "4096"}},
		{name: "rollback to the default sizes", bin: socklbBin},
	})
	o := stopUDP(t, udp)
	t.Logf("unconnected UDP socket: replies %v, sources %v, errors %v", o.Replies, o.Sources, o.Errors)
	if o.TotalErrors() != 0 || len(o.Replies) != 1 || !slices.Equal(o.Sources, []string{vip + ":53"}) {
		t.Errorf("an unconnected UDP socket across two size changes: replies %v from %v, errors %v (%s); want one pod, all from %s:53",
			o.Replies, o.Sources, o.Errors, o.FirstError, vip)
	}
}

// TestUpgradeLayoutUnderLoad: restarting into a binary whose maps have
// another layout, and back (the rollback), under a connect loop fails no
// connect: the new agent fills new maps while the pinned links still run
// the old programs on the old maps, then switches each link in one step,
// then unpins the old maps.
//
// sk_state is a new map at each step too, and the sockets held across
// both keep their state (carried by bpf/c/skcarry.c): a connected UDP
// socket's getpeername() shows the ClusterIP after every reply, as
// kube-proxy's conntrack would, and an unconnected one keeps its pod and
// sees every reply come from the ClusterIP.
func TestUpgradeLayoutUnderLoad(t *testing.T) {
	changed := layoutChangedBin(t)
	e := startEcho(t)
	conn := startUDP(t, e, "udp-connected")
	unconn := startUDP(t, e, "udp")
	// Both UDP sockets are held across both steps: each step's agent
	// carries at least their two sk_state entries.
	upgradeUnderLoad(t, e, []upgradeStep{
		{name: "changed layout", bin: changed, carries: 2},
		{name: "rollback to the first layout", bin: socklbBin, carries: 2},
	})
	c, u := stopUDP(t, conn), stopUDP(t, unconn)
	t.Logf("connected UDP socket: replies %v, peers %v, errors %v", c.Replies, c.Peers, c.Errors)
	if c.TotalErrors() != 0 || len(c.Replies) != 1 || !slices.Equal(c.Peers, []string{vip + ":53"}) {
		t.Errorf("a connected UDP socket across two layout changes: replies %v, getpeername %v, errors %v (%s); want one pod, always %s:53",
			c.Replies, c.Peers, c.Errors, c.FirstError, vip)
	}
	t.Logf("unconnected UDP socket: replies %v, sources %v, errors %v", u.Replies, u.Sources, u.Errors)
	if u.TotalErrors() != 0 || len(u.Replies) != 1 || !slices.Equal(u.Sources, []string{vip + ":53"}) {
		t.Errorf("an unconnected UDP socket across two layout changes: replies %v from %v, errors %v (%s); want one pod, all from %s:53",
			u.Replies, u.Sources, u.Errors, u.FirstError, vip)
	}
}

// upgradeUnderLoad restarts the agent once per step while a client
// connects to the ClusterIP in a loop, and checks after each step that
// the migration finished: one generation of maps pinned, a new one,
// readable by bpftool, and every pinned link running a program that uses
// it.
func upgradeUnderLoad(t *testing.T, e *env, steps []upgradeStep) {
	upgradeFromUnderLoad(t, e, waitGeneration(t, e, served{}), steps)
}

func upgradeFromUnderLoad(t *testing.T, e *env, gen served, steps []upgradeStep) {
	bg := startLoop(t, e.ctx(), e.client(), e.cg, vip+":80", e.served)
	baseline := servedIn(e.served, window)
	for _, s := range steps {
		before := e.served()
		e.stopAgent(syscall.SIGTERM)
		e.startAgentBin(s.bin, s.args...)
		next := waitGeneration(t, e, gen)
		if e.waitLog(5*time.Second, migratedRE) == nil {
			t.Errorf("%s: the agent did not log its migration:\n%s", s.name, e.agentLog())
		}
		if s.carries > 0 {
			n := -1
			if m := e.waitLog(5*time.Second, carriedRE); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			if n < s.carries {
				t.Errorf("%s: the agent logged carrying sk_state of %d sockets, want at least %d (-1: no such line):\n%s", s.name, n, s.carries, e.agentLog())
			}
		}
		served := e.served() - before
		t.Logf("%s: generation %s -> %s, %d connects served meanwhile", s.name, filepath.Base(gen.gen), filepath.Base(next.gen), served)
		if served == 0 {
			t.Fatalf("%s: no connect was served while the agent was replaced: the loop did not cover it", s.name)
		}
		gen = next
		time.Sleep(500 * time.Millisecond)
	}
	checkShare(t, "after the upgrades", servedIn(e.served, window), baseline)
	res := stopLoop(t, bg, "the upgrades")
	t.Logf("%d connects across %d upgrades, errors %v", res.OK, len(steps), res.Errors)
	if res.TotalErrors() != 0 {
		t.Fatalf("%d connects failed across the upgrades: %v (%s)\n%s", res.TotalErrors(), res.Errors, res.FirstError, e.agentLog())
	}
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.OK != 10 {
		t.Fatalf("after the upgrades: %v %v", res.Replies, res.Errors)
	}
}

var generationDir = regexp.MustCompile(`^v1-[0-9a-f]{12}$`)

var migratedRE = regexp.MustCompile(`moving to new ones without detaching the hooks`)

var carriedRE = regexp.MustCompile(`carried sk_state of ([0-9]+) sockets`)

// startUDP starts a UDP client of the ClusterIP's port 53 that sends one
// query every 100 ms on one socket until stopUDP: mode "udp" (unconnected)
// or "udp-connected".
func startUDP(t *testing.T, e *env, mode string) *lab.Background {
	t.Helper()
	bg, err := e.client().Start(e.ctx(), e.cg, mode, "--addr", vip+":53", "--count", "0", "--interval", "100ms", "--seq")
	if err != nil {
		t.Fatal(err)
	}
	return bg
}

// stopUDP stops a UDP client started before the upgrades, which must have
// outlived them all: it is still running once they are over.
func stopUDP(t *testing.T, bg *lab.Background) *lab.Result {
	t.Helper()
	if !bg.Running() {
		res, err := bg.Stop()
		t.Fatalf("a UDP client ended before the upgrades did (%+v %v): it did not cover every step", res, err)
	}
	res, err := bg.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// served is a generation of maps and the programs the links run on it.
type served struct {
	gen   string
	progs map[int]bool
}

// waitGeneration waits until the agent has finished moving off prev: one
// other generation of maps, and new programs using it on every link.
func waitGeneration(t *testing.T, e *env, prev served) served {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		var next served
		next.gen, next.progs, why = servingGeneration(e, prev.progs)
		if why == "" && next.gen != prev.gen {
			return next
		}
		if why == "" {
			why = "the maps are still in " + next.gen
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the agent did not finish moving off %s within 15 s: %s\n%s", prev.gen, why, e.agentLog())
	return served{}
}

// servingGeneration returns the only pinned generation and the programs
// the links run, once every link runs a program that is not one of prev and
// uses maps of that generation, or says what is not so yet.
func servingGeneration(e *env, prev map[int]bool) (string, map[int]bool, string) {
	mapsDir := filepath.Join(e.fs.Path(), "maps")
	ents, err := os.ReadDir(mapsDir)
	if err != nil {
		return "", nil, err.Error()
	}
	var gens, other []string
	for _, d := range ents {
		switch {
		case d.IsDir() && generationDir.MatchString(d.Name()):
			gens = append(gens, filepath.Join(mapsDir, d.Name()))
		case d.Name() == "grown":
			// The record of a growth (the --max-* sizes it grew from).
		default:
			other = append(other, d.Name())
		}
	}
	if len(gens) != 1 || len(other) != 0 {
		return "", nil, fmt.Sprintf("pinned under %s: generations %v, other pins %v", mapsDir, gens, other)
	}
	gen := gens[0]
	pins, err := os.ReadDir(gen)
	if err != nil {
		return "", nil, err.Error()
	}
	genMaps := map[int]bool{}
	for _, p := range pins {
		var m struct {
			ID int `json:"id"`
		}
		if err := bpftoolJSON(&m, "map", "show", "pinned", filepath.Join(gen, p.Name())); err != nil {
			return "", nil, err.Error()
		}
		genMaps[m.ID] = true
	}
	var dump []json.RawMessage
	if err := bpftoolJSON(&dump, "map", "dump", "pinned", filepath.Join(gen, "services")); err != nil || len(dump) == 0 {
		return "", nil, fmt.Sprintf("bpftool map dump of %s: %v, %d entries", gen, err, len(dump))
	}
	links, err := os.ReadDir(filepath.Join(e.fs.Path(), "links"))
	// No Service here has loadBalancerSourceRanges, so the egress hook,
	// attached only for them, is not.
	if err != nil || len(links) != 9 {
		return "", nil, fmt.Sprintf("links pinned: %d (%v), want the 8 sock_addr hooks and sock_release", len(links), err)
	}
	progs := map[int]bool{}
	for _, l := range links {
		var li struct {
			ProgID int `json:"prog_id"`
		}
		if err := bpftoolJSON(&li, "link", "show", "pinned", filepath.Join(e.fs.Path(), "links", l.Name())); err != nil {
			return "", nil, err.Error()
		}
		if prev[li.ProgID] {
			return "", nil, fmt.Sprintf("link %s still runs program %d of the agent before", l.Name(), li.ProgID)
		}
		progs[li.ProgID] = true
		var pi struct {
			MapIDs []int `json:"map_ids"`
		}
		if err := bpftoolJSON(&pi, "prog", "show", "id", fmt.Sprint(li.ProgID)); err != nil {
			return "", nil, err.Error()
		}
		if !slices.ContainsFunc(pi.MapIDs, func(id int) bool { return genMaps[id] }) {
			return "", nil, fmt.Sprintf("link %s runs program %d, which uses maps %v, none of them pinned in %s", l.Name(), li.ProgID, pi.MapIDs, gen)
		}
		// Every map of the program is the new generation's, or its own
		// global data (.rodata, .bss, .data): one old map left would keep
		// the old state in use.
		for _, id := range pi.MapIDs {
			if genMaps[id] {
				continue
			}
			var mi struct {
				Name string `json:"name"`
			}
			if err := bpftoolJSON(&mi, "map", "show", "id", fmt.Sprint(id)); err != nil {
				return "", nil, err.Error()
			}
			if !strings.Contains(mi.Name, ".") {
				return "", nil, fmt.Sprintf("link %s runs program %d, which uses map %d (%s), not pinned in %s", l.Name(), li.ProgID, id, mi.Name, gen)
			}
		}
	}
	return gen, progs, ""
}

func bpftoolJSON(v any, args ...string) error {
	out, err := exec.Command("bpftool", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("bpftool %s: %w", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("bpftool %s: %w: %.300s", strings.Join(args, " "), err, out)
	}
	return nil
}
