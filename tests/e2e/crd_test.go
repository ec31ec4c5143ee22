package e2e

import (
	"path/filepath"
	"testing"
)

// installCRD installs a CRD from testdata/crds (see its README for where
// each comes from) and waits until the API server serves it, so that a
// dry-run right after validates against its schema instead of failing
// with "no matches for kind". It is deleted when the test ends, leaving
// the shared API server with the built-in APIs the other tests expect.
func installCRD(t *testing.T, file, name string) {
	t.Helper()
	f := filepath.Join(root, "tests/e2e/testdata/crds", file)
	// Server-side: the CRD is too large for client-side apply's
	// last-applied annotation to be a good idea, and apply is idempotent.
	if out, err := kubectl("apply", "--server-side", "-f", f); err != nil {
		t.Fatalf("installing CRD %s from %s: %v\n%s", name, f, err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl("delete", "crd", name, "--wait=true"); err != nil {
			t.Errorf("deleting CRD %s: %v\n%s", name, err, out)
		}
	})
	if out, err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/"+name); err != nil {
		t.Fatalf("CRD %s not Established within 60s: %v\n%s", name, err, out)
	}
}
