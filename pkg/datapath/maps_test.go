package datapath

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// The checks below read the BTF of the compiled objects, as Cilium's
// alignchecker and constchecker do, so C and Go cannot drift apart
// unnoticed: every map is in mapTable with C's default size and Go types
// of C's layout, and every frontend kind is paired on both sides. They
// parse the embedded ELF only and need no root.

func objectSpecs(t *testing.T) map[object]*ebpf.CollectionSpec {
	t.Helper()
	out := map[object]*ebpf.CollectionSpec{}
	for obj, load := range map[object]func() (*ebpf.CollectionSpec, error){
		objHooks:        socklbbpf.LoadSocklb,
		objSockterm:     socklbbpf.LoadSockterm,
		objNodeport:     socklbbpf.LoadNodeport,
		"socklb_test.c": socklbbpf.LoadSocklbTest,
	} {
		spec, err := load()
		if err != nil {
			t.Fatalf("reading the embedded %s: %v", obj, err)
		}
		out[obj] = spec
	}
	return out
}

func TestMapTable(t *testing.T) {
	specs := objectSpecs(t)
	defaults := Config{}.withDefaults()
	for obj, spec := range specs {
		for name, ms := range spec.Maps {
			if !isStateMap(name) || (obj == "socklb_test.c" && strings.HasPrefix(name, "test_")) {
				continue // load-time constants; the test wrappers' own
			}
			def, ok := mapDefOf(name)
			if !ok {
				t.Errorf("map %s of %s has no row in mapTable (pkg/datapath/maps.go): add one", name, obj)
				continue
			}
			if def.owner != obj && def.owner != objHooks {
				t.Errorf("map %s is in %s, but mapTable says %s creates it", name, obj, def.owner)
			}
			switch {
			case def.size != nil && ms.MaxEntries != def.size(defaults):
				t.Errorf("map %s of %s: max_entries %d in C, %d from the agent's defaults (config.go): make them agree", name, obj, ms.MaxEntries, def.size(defaults))
			case def.size == nil && def.flag != "":
				t.Errorf("map %s: mapTable names flag %s but sizes nothing from it", name, def.flag)
			}
			sameLayout(t, name+" key", ms.Key, reflect.TypeOf(def.key))
			sameLayout(t, name+" value", ms.Value, reflect.TypeOf(def.value))
		}
	}
	for _, def := range mapTable {
		if _, ok := specs[def.owner].Maps[def.name]; !ok {
			t.Errorf("mapTable has %s, created by %s, but %s has no such map", def.name, def.owner, def.owner)
		}
	}
	for name := range mapFields(&tables{}) {
		if def, ok := mapDefOf(name); !ok || def.owner != objHooks {
			t.Errorf("tables reads %s, which is no pinned map of mapTable", name)
		}
	}
}

func TestTestContextLayout(t *testing.T) {
	var ctx *btf.Struct
	if err := objectSpecs(t)["socklb_test.c"].Types.TypeByName("test_ctx", &ctx); err != nil {
		t.Fatal(err)
	}
	sameLayout(t, "test_ctx", ctx, reflect.TypeOf(socklbbpf.SocklbTestTestCtx{}))
}

// sameLayout fails unless the Go type has the C type's size and, for a
// struct, the same fields at the same offsets.
func sameLayout(t *testing.T, what string, c btf.Type, g reflect.Type) {
	t.Helper()
	if g == nil {
		t.Errorf("%s: mapTable gives no Go type", what)
		return
	}
	size, err := btf.Sizeof(c)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if uintptr(size) != g.Size() {
		t.Errorf("%s: %d bytes in C (%s), %d in Go (%s)", what, size, c, g.Size(), g)
		return
	}
	st, ok := btf.UnderlyingType(c).(*btf.Struct)
	if !ok {
		return
	}
	var fields []reflect.StructField
	for i := 0; i < g.NumField(); i++ {
		if f := g.Field(i); f.Name != "_" {
			fields = append(fields, f)
		}
	}
	if len(fields) != len(st.Members) {
		t.Errorf("%s: %d fields in C, %d in Go (%s)", what, len(st.Members), len(fields), g)
		return
	}
	for i, m := range st.Members {
		if off := uintptr(m.Offset.Bytes()); fields[i].Offset != off {
			t.Errorf("%s: field %s at offset %d in C, %s at %d in Go", what, m.Name, off, fields[i].Name, fields[i].Offset)
		}
		sameLayout(t, what+"."+m.Name, m.Type, fields[i].Type)
	}
}

func TestKinds(t *testing.T) {
	var enum *btf.Enum
	if err := objectSpecs(t)[objHooks].Types.TypeByName("svc_kind", &enum); err != nil {
		t.Fatal(err)
	}
	inC := map[socklbbpf.SocklbSvcKind]string{}
	for _, v := range enum.Values {
		inC[socklbbpf.SocklbSvcKind(v.Value)] = v.Name
	}
	var inGo []servicemap.Kind
	for k := servicemap.Kind(0); k < 255; k++ {
		if !strings.HasPrefix(k.String(), "kind-") {
			inGo = append(inGo, k)
		}
	}
	paired := map[socklbbpf.SocklbSvcKind]int{}
	for _, p := range kinds {
		if _, ok := inC[p.m]; !ok {
			t.Errorf("kinds pairs %s with %d, which is no svc_kind of bpf/c/maps.h", p.sm, p.m)
		}
		paired[p.m]++
	}
	for v, name := range inC {
		if paired[v] != 1 {
			t.Errorf("svc_kind %s (%d) is paired %d times in kinds (pkg/datapath/kind.go), want once", name, v, paired[v])
		}
	}
	for _, k := range inGo {
		if got := kindFromMap(kindToMap(k)); got != k {
			t.Errorf("servicemap.%s goes to the map as %d and comes back as %s", k, kindToMap(k), got)
		}
		if _, ok := inC[kindToMap(k)]; !ok {
			t.Errorf("servicemap.%s has no svc_kind: add one to bpf/c/maps.h and pair them in kinds", k)
		}
	}
	if len(inGo) != len(inC) {
		t.Errorf("%d frontend kinds in servicemap, %d in svc_kind", len(inGo), len(inC))
	}
}
