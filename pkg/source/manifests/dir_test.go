package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func svc(name string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\nspec: {ports: [{port: 80}]}\n"
}

func TestReloadKeepsLastGoodObjectsOfABadFile(t *testing.T) {
	dir := t.TempDir()
	var p problems
	d := newDirState(dir, p.report)
	a := writeFile(t, dir, "a.yaml", svc("a1")+"---\n"+svc("a2"))
	writeFile(t, dir, "b.yaml", svc("b"))
	if !d.reload() {
		t.Fatal("first reload: no change reported")
	}
	if got := serviceNames(d.input("n")); !equal(got, []string{"default/a1", "default/a2", "default/b"}) {
		t.Fatalf("services = %v", got)
	}

	// Half-saved a.yaml: the second document is broken. Both of a.yaml's
	// Services stay; b.yaml is unaffected.
	writeFile(t, dir, "a.yaml", svc("a1")+"---\nkind: [\n")
	writeFile(t, dir, "b.yaml", svc("b")+"---\n"+svc("b2"))
	if !d.reload() {
		t.Fatal("no change reported")
	}
	if got := serviceNames(d.input("n")); !equal(got, []string{"default/a1", "default/a2", "default/b", "default/b2"}) {
		t.Fatalf("services = %v", got)
	}
	got := p.take()
	if len(got) != 1 || got[0].Kind != "File" || got[0].Object.Name != a ||
		!strings.Contains(got[0].Reason, "document 2 (starting at line 6): parsing YAML") ||
		!strings.Contains(got[0].Reason, "keeping this file's last good objects (2)") {
		t.Fatalf("problems = %v", got)
	}

	// Reloading unchanged files reports nothing new.
	if d.reload() {
		t.Error("unchanged directory reported as changed")
	}
	if got := p.take(); len(got) != 0 {
		t.Errorf("problems reported again: %v", got)
	}

	// Fixed: the new contents replace the kept ones.
	writeFile(t, dir, "a.yaml", svc("a3"))
	d.reload()
	if got := serviceNames(d.input("n")); !equal(got, []string{"default/a3", "default/b", "default/b2"}) {
		t.Fatalf("services = %v", got)
	}
}

func TestReloadSkipsOtherEntries(t *testing.T) {
	dir := t.TempDir()
	var p problems
	d := newDirState(dir, p.report)
	writeFile(t, dir, "a.yml", svc("a"))
	writeFile(t, dir, "b.JSON", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}`)
	writeFile(t, dir, "notes.txt", "not: read")
	writeFile(t, dir, ".a.yaml.swp", "garbage: [")
	if err := os.Symlink("missing.yaml", filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.yaml"), "c.yaml", svc("c"))
	d.reload()
	if got := serviceNames(d.input("n")); !equal(got, []string{"default/a", "default/b"}) {
		t.Fatalf("services = %v", got)
	}
	if got := p.take(); len(got) != 0 {
		t.Errorf("problems = %v", got)
	}
}

func TestReloadRemovedFileAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	var p problems
	d := newDirState(dir, p.report)
	writeFile(t, dir, "a.yaml", svc("x"))
	b := writeFile(t, dir, "b.yaml", svc("x")+"---\n"+nodeA)
	d.reload()
	in := d.input("n1")
	if len(in.Services) != 1 || len(in.Nodes) != 1 || in.NodeName != "n1" {
		t.Fatalf("input = %+v", in)
	}
	got := p.take()
	if len(got) != 1 || got[0].Kind != "Service" || got[0].Object.String() != "default/x" ||
		!strings.Contains(got[0].Reason, "a.yaml and "+b) {
		t.Errorf("problems = %v", got)
	}

	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if !d.reload() {
		t.Fatal("removal not reported as a change")
	}
	if in := d.input("n1"); len(in.Services) != 1 || len(in.Nodes) != 0 {
		t.Fatalf("after removal: %+v", in)
	}
}

func TestReloadMissingDirectoryKeepsObjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var p problems
	d := newDirState(dir, p.report)
	writeFile(t, dir, "a.yaml", svc("a"))
	d.reload()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if d.reload() {
		t.Error("a missing directory reported as a change")
	}
	if got := serviceNames(d.input("n")); !equal(got, []string{"default/a"}) {
		t.Errorf("services = %v", got)
	}
	if got := p.take(); len(got) != 1 || got[0].Object.Name != dir {
		t.Errorf("problems = %v", got)
	}
}
