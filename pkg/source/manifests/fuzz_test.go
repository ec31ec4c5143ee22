package manifests

import (
	"os"
	"testing"
)

// FuzzDecode checks that no file contents, however broken, make Decode panic
// or return objects the rest of the agent cannot key.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"",
		"---\n---\n",
		"# only a comment\n",
		svcA + "---\n" + sliceA + "---\n" + nodeA,
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n}}\n- null\n- 3\n",
		"apiVersion: v1\nkind: ServiceList\nitems: [{metadata: {name: a}}]\n",
		`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"ports":[{"port":80}]}}`,
		"kind: [unclosed\n",
		"apiVersion: v1\nkind: Service\nspec: {ports: 80}\n",
		"--- !!map\n? a\n: b\n",
		"a: &a [*a]\n",
		"\xff\xfe\x00",
	} {
		f.Add([]byte(seed))
	}
	if demo, err := os.ReadFile("../../../examples/demo.yaml"); err == nil {
		f.Add(demo)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, errs := Decode(data)
		for _, e := range errs {
			if e.Doc < 1 || e.Line < 1 || e.Err == nil {
				t.Fatalf("bad position or nil error: %+v", e)
			}
			_ = e.Error()
		}
		for _, s := range objs.Services {
			if s == nil || s.Name == "" || s.Namespace == "" {
				t.Fatalf("unusable Service %v", s)
			}
		}
		for _, s := range objs.Slices {
			if s == nil || s.Name == "" || s.Namespace == "" {
				t.Fatalf("unusable EndpointSlice %v", s)
			}
		}
		for _, n := range objs.Nodes {
			if n == nil || n.Name == "" {
				t.Fatalf("unusable Node %v", n)
			}
		}
	})
}
