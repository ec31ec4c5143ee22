package datapath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCleanupForcedUnderRunningAgent: with --force under a running agent,
// pins the agent puts back while Cleanup runs are reported as put back,
// not as a failure; a name socklb never pins is still an error naming it.
func TestCleanupForcedUnderRunningAgent(t *testing.T) {
	cases := []struct {
		name        string
		force       bool
		pinned      string // created between unpinning and removing the directories
		wantErr     string
		wantPutBack []string
	}{
		{name: "refused without force", wantErr: "pass --force"},
		{name: "nothing put back", force: true},
		{name: "agent re-pinned a link", force: true, pinned: "links/connect4", wantPutBack: []string{"links", "."}},
		{name: "agent re-pinned a map generation", force: true, pinned: "maps/v1-0123456789ab/services", wantPutBack: []string{"maps", "."}},
		{name: "someone else's pin", force: true, pinned: "links/not-socklb", wantErr: "links/not-socklb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"links", "maps"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			touch(t, filepath.Join(dir, "links", "connect4"))
			agent, err := tryLock(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer agent.release()
			testAfterUnpin = func() {
				if tc.pinned != "" {
					touch(t, filepath.Join(dir, tc.pinned))
				}
			}
			defer func() { testAfterUnpin = nil }()

			res, err := Cleanup(dir, tc.force)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Cleanup: err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if !strings.Contains(res.Holder, "pid ") {
				t.Errorf("holder %q does not name the agent's pid", res.Holder)
			}
			var want []string
			for _, p := range tc.wantPutBack {
				want = append(want, filepath.Join(dir, p))
			}
			if strings.Join(res.PutBack, " ") != strings.Join(want, " ") {
				t.Errorf("put back %q, want %q", res.PutBack, want)
			}
		})
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
