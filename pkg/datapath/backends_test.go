package datapath

import (
	"net/netip"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestBackendsSharedAcrossFrontends: an endpoint of a Service port is one
// backends entry however many frontends the port has (its ClusterIP and
// its NodePort), on the batch path and per entry alike; another Service
// selecting the same pod, or another protocol, has its own, so counters
// stay per Service port. An entry stays while a frontend uses it, through
// a restart's adoption, and goes with the last.
func TestBackendsSharedAcrossFrontends(t *testing.T) {
	for _, batched := range []bool{false, true} {
		name := "per-entry"
		if batched {
			name = "batched"
		}
		t.Run(name, func(t *testing.T) {
			dir := pinDir(t)
			d := openTest(t, Config{BPFFSPath: dir})
			if batched {
				d.batch.min = 1
			} else {
				d.batch.min = 1 << 30
			}
			cip := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:8080", "10.244.1.2:8080")
			np := frontend("192.0.2.1", 30080, servicemap.TCP, "10.244.1.1:8080", "10.244.1.2:8080")
			np.Kind, np.Service = servicemap.KindNodePort, cip.Service
			other := frontend("10.96.0.11", 81, servicemap.TCP, "10.244.1.2:8080")
			udp := frontend("10.96.0.12", 8080, servicemap.UDP, "10.244.1.2:8080") // another protocol: another entry
			res := mustApply(t, d, state(cip, np, other, udp))
			if batched != (res.Batched == 4) {
				t.Fatalf("batched %d of 4 frontends", res.Batched)
			}
			if n := countKeys[uint32](t, d.t.backends); n != 4 {
				t.Fatalf("backends map holds %d entries, want 4 (2 of the port with a NodePort, 1 of each other Service)", n)
			}
			p := d.Programmed()
			for i := range cip.Backends {
				if p[cip.Key].BackendIDs[i] != p[np.Key].BackendIDs[i] {
					t.Errorf("%s has id %d under the ClusterIP and %d under the NodePort, want one", cip.Backends[i], p[cip.Key].BackendIDs[i], p[np.Key].BackendIDs[i])
				}
			}
			if p[other.Key].BackendIDs[0] == p[cip.Key].BackendIDs[1] {
				t.Error("another Service shares the Service port's entry of the same pod")
			}
			if p[udp.Key].BackendIDs[0] == p[other.Key].BackendIDs[0] {
				t.Error("the UDP endpoint shares the TCP one's entry")
			}
			if u, err := d.MapUsage(); err != nil || usageOf(u, socklbbpf.SocklbMapBackends) != 4 {
				t.Errorf("usage says %d backends (%v), want 4", usageOf(u, socklbbpf.SocklbMapBackends), err)
			}

			// A restart adopts the uses: dropping the NodePort keeps
			// the entries the ClusterIP uses; dropping it too, they go.
			d.Close()
			d = openTest(t, Config{BPFFSPath: dir})
			prog := testProgs(t, d)
			shared := p[cip.Key].BackendIDs[1]
			mustApply(t, d, state(cip, other, udp))
			if n := countKeys[uint32](t, d.t.backends); n != 4 {
				t.Errorf("backends map holds %d entries after removing the NodePort, want 4", n)
			}
			var be socklbbpf.SocklbBackend
			if err := d.t.backends.Lookup(shared, &be); err != nil {
				t.Fatalf("the entry still used by %s is gone: %v", cip.Key, err)
			}
			r := run(t, prog.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
			if r.verdict != verdictXlated || (r.backendID != shared && r.backendID != p[cip.Key].BackendIDs[0]) {
				t.Errorf("connect to the ClusterIP: %+v", r)
			}
			mustApply(t, d, state(other, udp))
			if n := countKeys[uint32](t, d.t.backends); n != 2 {
				t.Errorf("backends map holds %d entries after the ClusterIP left too, want 2", n)
			}
		})
	}
}

// TestBackendTableAdoptsUnsharedIDs: maps from an agent that gave each
// frontend its own copy of an endpoint adopt as they are; each old id
// lives until its last frontend lets go, and new uses take one id.
func TestBackendTableAdoptsUnsharedIDs(t *testing.T) {
	tb := newBackendTable(16)
	k := backendKeyOf(1, servicemap.TCP, servicemap.Backend{Addr: netip.MustParseAddr("10.244.1.1"), Port: 80})
	tb.adopt(k, 3)
	tb.adopt(k, 7) // the same endpoint, another frontend's copy
	tb.adopt(k, 3)
	if tb.len() != 2 {
		t.Fatalf("%d ids held, want 2", tb.len())
	}
	id, fresh, err := tb.acquire(k)
	if err != nil || fresh || id != 3 {
		t.Fatalf("acquire = %d, fresh %v, %v; want the adopted 3", id, fresh, err)
	}
	if tb.release(k, 7) != true {
		t.Error("releasing the only use of the unshared id 7 did not free it")
	}
	for i := range 2 {
		if tb.release(k, 3) {
			t.Errorf("release %d of 3's three uses freed it", i+1)
		}
	}
	if !tb.release(k, 3) || tb.len() != 0 {
		t.Errorf("the last use of 3 did not free it (%d ids held)", tb.len())
	}
}

func usageOf(u []MapUsage, name string) uint32 {
	for _, m := range u {
		if m.Name == name {
			return m.Entries
		}
	}
	return 0
}

// TestPortRenameKeepsMembers: a frontend whose Service port is renamed
// under the same address takes the new port's backend entries; the
// members of the endpoints it keeps stay (its svc id is the same, so their
// keys are the new generation's too), and the old port's entries go.
func TestPortRenameKeepsMembers(t *testing.T) {
	d := openTest(t, Config{})
	fe := frontend("10.96.0.20", 53, servicemap.UDP, "10.244.1.1:5353", "10.244.1.2:5353")
	mustApply(t, d, state(fe))
	before := d.Programmed()[fe.Key]
	renamed := fe
	renamed.PortName = "dns-renamed"
	mustApply(t, d, state(renamed))
	after := d.Programmed()[fe.Key]
	if after.AffinityID == before.AffinityID {
		t.Fatalf("the renamed port kept affinity id %d", after.AffinityID)
	}
	for i, b := range renamed.Backends {
		var id uint32
		if err := d.t.members.Lookup(memberKey(after.ID, b), &id); err != nil || id != after.BackendIDs[i] {
			t.Errorf("member %s: id %d (%v), want %d", b, id, err, after.BackendIDs[i])
		}
	}
	if n := countKeys[uint32](t, d.t.backends); n != 2 {
		t.Errorf("backends map holds %d entries after the rename, want 2", n)
	}
}
