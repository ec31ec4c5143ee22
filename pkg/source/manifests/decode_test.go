package manifests

import (
	"strings"
	"testing"
)

const (
	svcA = `apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
`
	sliceA = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, namespace: ns, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
`
	nodeA = `apiVersion: v1
kind: Node
metadata: {name: n1}
`
)

func TestDecode(t *testing.T) {
	type want struct {
		services, slices, nodes int
		errs                    []string // substrings, one per DocError, in order
		fatal                   bool
	}
	tests := []struct {
		name string
		in   string
		want want
	}{
		{"multi-doc", svcA + "---\n" + sliceA + "---\n" + nodeA, want{services: 1, slices: 1, nodes: 1}},
		{"empty file", "", want{}},
		{"empty docs", "---\n---\n\n---\n" + svcA + "---\n", want{services: 1}},
		{"comments-only docs", "# header\n---\n# nothing here\n---\n" + svcA, want{services: 1}},
		{"separator with comment", svcA + "--- # next\n" + nodeA, want{services: 1, nodes: 1}},
		{"CRLF", strings.ReplaceAll(svcA+"---\n"+nodeA, "\n", "\r\n"), want{services: 1, nodes: 1}},
		{"JSON", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`, want{nodes: 1}},
		{"List", `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}]}}
- {apiVersion: v1, kind: Node, metadata: {name: n1}}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: a-1}, addressType: IPv4, endpoints: []}
`, want{services: 1, slices: 1, nodes: 1}},
		{"typed list", `apiVersion: v1
kind: ServiceList
items:
- {metadata: {name: a}, spec: {ports: [{port: 80}]}}
- {metadata: {name: b}, spec: {ports: [{port: 80}]}}
`, want{services: 2}},
		{"List with unknown kind and nested List", `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
- {apiVersion: v1, kind: List, items: []}
- {apiVersion: v1, kind: Node, metadata: {name: n1}}
`, want{nodes: 1, errs: []string{"document 1 (starting at line 1), items[0]: kind ConfigMap", "items[1]: a List inside a List"}}},
		{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + svcA,
			want{services: 1, errs: []string{"document 1 (starting at line 1): kind ConfigMap (apiVersion v1) ignored"}}},
		{"unknown group", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			want{errs: []string{"kind Deployment (apiVersion apps/v1) ignored"}}},
		{"old EndpointSlice version", "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: e}\n",
			want{errs: []string{"apiVersion discovery.k8s.io/v1beta1"}}},
		{"bad YAML", svcA + "---\nkind: [unclosed\n---\n" + nodeA,
			want{services: 1, nodes: 1, fatal: true, errs: []string{"document 2 (starting at line 6): parsing YAML"}}},
		{"scalar document", "just text\n", want{fatal: true, errs: []string{"not a Kubernetes object"}}},
		{"missing kind", "apiVersion: v1\nmetadata: {name: x}\n", want{fatal: true, errs: []string{"kind or apiVersion missing"}}},
		{"wrong field type", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: 80}\n",
			want{fatal: true, errs: []string{"decoding Service"}}},
		{"unknown field kept", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, targetport: 8080}]}\n",
			want{services: 1, errs: []string{`unknown field "spec.ports[0].targetport"`}}},
		{"duplicate key kept", "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nmetadata: {name: n1}\n",
			want{nodes: 1, errs: []string{"already set in map"}}},
		{"no name", "apiVersion: v1\nkind: Node\nmetadata: {}\n", want{errs: []string{"Node: metadata.name is empty"}}},
		{"document start with content", "--- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n", want{nodes: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := Decode([]byte(tt.in))
			if len(objs.Services) != tt.want.services || len(objs.Slices) != tt.want.slices || len(objs.Nodes) != tt.want.nodes {
				t.Errorf("got %d services, %d slices, %d nodes; want %d, %d, %d",
					len(objs.Services), len(objs.Slices), len(objs.Nodes), tt.want.services, tt.want.slices, tt.want.nodes)
			}
			if got := Fatal(errs); got != tt.want.fatal {
				t.Errorf("Fatal = %v, want %v", got, tt.want.fatal)
			}
			if len(errs) != len(tt.want.errs) {
				t.Fatalf("got errors %v, want %d matching %q", errs, len(tt.want.errs), tt.want.errs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.want.errs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), tt.want.errs[i])
				}
			}
		})
	}
}

func TestDecodeDefaultsNamespace(t *testing.T) {
	objs, errs := Decode([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n" +
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a-1}\naddressType: IPv4\nendpoints: []\n"))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if ns := objs.Services[0].Namespace; ns != "default" {
		t.Errorf("Service namespace = %q, want default", ns)
	}
	if ns := objs.Slices[0].Namespace; ns != "default" {
		t.Errorf("EndpointSlice namespace = %q, want default", ns)
	}
}

func TestSplitDocumentsLines(t *testing.T) {
	docs := splitDocuments([]byte("# c\n---\na: 1\n---\n\n---\nb: 2\n----\nc: 3\n--- d: 4\n"))
	var got []string
	for _, d := range docs {
		got = append(got, strings.TrimSpace(string(d.body)))
	}
	want := []string{"# c", "a: 1", "b: 2\n----\nc: 3", "--- d: 4"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("bodies = %q, want %q", got, want)
	}
	for i, line := range []int{1, 3, 7, 10} {
		if docs[i].line != line || docs[i].index != i+1 {
			t.Errorf("doc %d: index %d line %d, want index %d line %d", i, docs[i].index, docs[i].line, i+1, line)
		}
	}
}
