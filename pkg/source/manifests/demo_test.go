package manifests

import (
	"os"
	"testing"
)

// The demo manifests are what `make demo` programs; a typo there would only
// show up as a confusing demo.
func TestDemoManifests(t *testing.T) {
	data, err := os.ReadFile("../../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, errs := Decode(data)
	if len(errs) != 0 {
		t.Fatalf("problems: %v", errs)
	}
	if len(objs.Nodes) != 1 || len(objs.Services) != 2 || len(objs.Slices) != 2 {
		t.Fatalf("got %d nodes, %d services, %d slices; want 1, 2, 2", len(objs.Nodes), len(objs.Services), len(objs.Slices))
	}
	echo := objs.Slices[0]
	if echo.Labels["kubernetes.io/service-name"] != "echo" || len(echo.Endpoints) != 3 || len(echo.Ports) != 2 {
		t.Errorf("echo slice = %+v", echo)
	}
	if empty := objs.Slices[1]; empty.Labels["kubernetes.io/service-name"] != "empty" || len(empty.Endpoints) != 0 {
		t.Errorf("empty slice = %+v", empty)
	}
}
