package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHelmLint: `helm lint --strict` passes on the chart in both modes
// (strict fails on warnings too, such as a template referring to a value
// the defaults lack), and the map memory budget reaches the agent's flags.
func TestHelmLint(t *testing.T) {
	chart := filepath.Join(root, "charts/socklb")
	for _, mode := range []string{"replace", "beside"} {
		if out, err := helm(t, "lint", "--strict", chart, "--set", "kubeProxy.mode="+mode); err != nil {
			t.Errorf("helm lint --strict (kubeProxy.mode=%s): %v\n%s", mode, err, out)
		}
	}
	r := decodeRendered(t, "chart", helmTemplate(t, "--set", "maps.memoryBudget=512Mi"))
	if args := strings.Join(r.ds.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--map-memory-budget=512Mi") {
		t.Errorf("maps.memoryBudget=512Mi: the agent's args %s", args)
	}
	if out, err := helm(t, "template", "socklb", chart, "--set", "maps.memoryBudget=lots"); err == nil {
		t.Errorf("maps.memoryBudget=lots rendered; the schema must refuse it:\n%s", out)
	}
}
