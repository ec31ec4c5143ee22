package datapath

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	socklbbpf "github.com/socklb/socklb/bpf"
)

// mapLayout is what decides whether a pinned map can serve this binary's
// programs: the kernel checks none of it once a map fd is in a program.
// The key and value types come from BTF, not from their sizes, because a
// field renamed or moved keeps the size and changes the meaning (cilium/ebpf's
// own MapSpec.Compatible compares sizes only).
type mapLayout struct {
	typ        ebpf.MapType
	flags      uint32
	keySize    uint32
	valueSize  uint32
	maxEntries uint32
	types      string // the map's key and value BTF, described field by field
}

// sameShape says the maps hold the same keys and values: entries copy
// from one to the other, whatever their capacities.
func (a mapLayout) sameShape(b mapLayout) bool {
	a.maxEntries, b.maxEntries = 0, 0
	return a == b && a.types != ""
}

func (a mapLayout) String() string {
	return fmt.Sprintf("%v flags=%#x key=%d value=%d max_entries=%d btf=%s", a.typ, a.flags, a.keySize, a.valueSize, a.maxEntries, a.types)
}

// specLayout is the layout a map made from ms gets.
func specLayout(ms *ebpf.MapSpec) (mapLayout, error) {
	l := mapLayout{typ: ms.Type, flags: ms.Flags, keySize: ms.KeySize, valueSize: ms.ValueSize, maxEntries: ms.MaxEntries}
	if ms.Key == nil || ms.Value == nil {
		return l, fmt.Errorf("map %s has no BTF key or value type: declare it with __type() in bpf/c so its layout can be compared", ms.Name)
	}
	l.types = describeType(ms.Key, 0) + " -> " + describeType(ms.Value, 0)
	return l, nil
}

// pinnedLayout reads the layout of a map that exists in the kernel. A map
// without BTF gets no types, and so never matches a spec.
func pinnedLayout(m *ebpf.Map) mapLayout {
	l := mapLayout{typ: m.Type(), flags: m.Flags(), keySize: m.KeySize(), valueSize: m.ValueSize(), maxEntries: m.MaxEntries()}
	h, err := m.Handle()
	if err != nil {
		return l
	}
	defer h.Close()
	spec, err := h.Spec(nil)
	if err != nil {
		return l
	}
	// cilium/ebpf makes a map's BTF with btf.MarshalMapKV, which gives the
	// key id 1 and the value id 2.
	key, kerr := spec.TypeByID(1)
	value, verr := spec.TypeByID(2)
	if kerr != nil || verr != nil {
		return l
	}
	l.types = describeType(key, 0) + " -> " + describeType(value, 0)
	return l
}

// describeType writes a type out in full, with names, sizes and offsets:
// two types describe alike exactly when they lay out the same bytes under
// the same names, however their BTF was deduplicated.
func describeType(t btf.Type, depth int) string {
	if depth > 16 {
		return "..."
	}
	in := func(t btf.Type) string { return describeType(t, depth+1) }
	members := func(ms []btf.Member) string {
		var sb strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&sb, "%s@%d:%d %s;", m.Name, m.Offset, m.BitfieldSize, in(m.Type))
		}
		return sb.String()
	}
	switch t := t.(type) {
	case *btf.Int:
		return fmt.Sprintf("int(%s,%d,%v)", t.Name, t.Size, t.Encoding)
	case *btf.Struct:
		return fmt.Sprintf("struct %s(%d){%s}", t.Name, t.Size, members(t.Members))
	case *btf.Union:
		return fmt.Sprintf("union %s(%d){%s}", t.Name, t.Size, members(t.Members))
	case *btf.Array:
		return fmt.Sprintf("[%d]%s", t.Nelems, in(t.Type))
	case *btf.Typedef:
		return fmt.Sprintf("%s=%s", t.Name, in(t.Type))
	case *btf.Enum:
		return fmt.Sprintf("enum %s(%d,%v)%v", t.Name, t.Size, t.Signed, t.Values)
	case *btf.Pointer:
		return "*" + in(t.Target)
	case *btf.Const:
		return "const " + in(t.Type)
	case *btf.Volatile:
		return "volatile " + in(t.Type)
	default:
		return fmt.Sprintf("%T(%s)", t, t.TypeName())
	}
}

// layoutVersion names the pin directory of a set of maps: a hash of every
// state map's layout, capacities included. Nothing has to be bumped by
// hand when a struct in bpf/c/maps.h or a --max-* flag changes: the name
// changes with it, and the agent migrates to a new directory.
func layoutVersion(maps map[string]*ebpf.MapSpec) (string, error) {
	names := make([]string, 0, len(maps))
	for name := range maps {
		if isStateMap(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		l, err := specLayout(maps[name])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", name, l)
	}
	return generationPrefix + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// testLayoutChange is empty in every real build. Integration tests build a
// second agent with
//
//	-ldflags "-X github.com/socklb/socklb/pkg/datapath.testLayoutChange=1"
//
// which renames the value type of every state map: the same bytes under
// another BTF, the kind of change only a BTF comparison notices. It stands
// for a release that changed bpf/c/maps.h without a second copy of the
// generated BPF object in the tree. The value "service-maps" leaves
// sk_state alone: a release that changed other maps but not struct
// sock_state.
var testLayoutChange string

func applyTestLayoutChange(maps map[string]*ebpf.MapSpec) {
	if testLayoutChange == "" {
		return
	}
	for name, ms := range maps {
		if !isStateMap(name) || ms.Value == nil {
			continue
		}
		if testLayoutChange == "service-maps" && name == socklbbpf.SocklbMapSkState {
			continue
		}
		v := btf.Copy(ms.Value)
		switch t := v.(type) {
		case *btf.Struct:
			t.Name += "_v2"
		case *btf.Typedef:
			t.Name += "_v2"
		case *btf.Int:
			t.Name += "_v2"
		case *btf.Enum:
			t.Name += "_v2"
		}
		ms.Value = v
	}
}
