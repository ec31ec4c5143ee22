package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs are the pages whose command sequences a user copies.
var userDocs = []string{"docs/install.md", "docs/upgrade.md", "docs/uninstall.md", "docs/migrate-from-kube-proxy.md"}

// shellLines returns the command lines of a page's ```sh blocks, comments
// dropped and `a && b` split.
func shellLines(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, l := range strings.Split(block[1], "\n") {
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			for _, part := range strings.Split(l, "&&") {
				if part = strings.TrimSpace(part); part != "" {
					lines = append(lines, part)
				}
			}
		}
	}
	return lines
}

// TestDocsCommands: every `kubectl apply -k`/`delete -k` in the user docs
// names a kustomization the API server accepts, every `helm
// install/upgrade` renders with its values and passes a server dry-run,
// and every socklb and `kubectl socklb` command and flag they use exists.
func TestDocsCommands(t *testing.T) {
	needCluster(t)
	plugin := kubectlSocklb(t)
	checked := 0
	for _, page := range userDocs {
		for _, line := range shellLines(t, page) {
			f := strings.Fields(line)
			switch {
			case len(f) >= 4 && f[0] == "kubectl" && (f[1] == "apply" || f[1] == "delete") && f[2] == "-k":
				checked++
				if out, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-k", filepath.Join(root, f[3])); err != nil {
					t.Errorf("%s: %q: the API server rejects %s: %v\n%s", page, line, f[3], err, out)
				}
			case len(f) >= 4 && f[0] == "helm" && (f[1] == "install" || f[1] == "upgrade"):
				checked++
				args := []string{"template", f[2], filepath.Join(root, f[3])}
				for _, a := range f[4:] {
					if a != "--reuse-values" {
						args = append(args, a)
					}
				}
				out, err := helm(t, args...)
				if err != nil {
					t.Errorf("%s: %q: helm template: %v\n%s", page, line, err, out)
					continue
				}
				file := filepath.Join(t.TempDir(), "render.yaml")
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				if res, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-f", file); err != nil {
					t.Errorf("%s: %q: the API server rejects the render: %v\n%s", page, line, err, res)
				}
			case len(f) >= 3 && f[0] == "kubectl" && f[1] == "socklb":
				checked++
				_, help, err := plugin(f[2], "-h")
				checkFlags(t, page, line, help, err, f[3:])
			default:
				// socklb itself, also as /socklb after `kubectl exec ... --`.
				for i, w := range f {
					if (w == "socklb" || w == "/socklb") && i+1 < len(f) && (i == 0 || f[i-1] == "--") {
						checked++
						help, err := exec.Command(socklbBin, f[i+1], "-h").CombinedOutput()
						checkFlags(t, page, line, string(help), err, f[i+2:])
						break
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d commands checked in %v: the parser lost track of the pages", checked, userDocs)
	}
}

// checkFlags: the subcommand's help came out, and names every flag used.
func checkFlags(t *testing.T, page, line, help string, err error, args []string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %q: the subcommand does not exist: %v\n%s", page, line, err, help)
		return
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(name) + `[\s=,]`).MatchString(help) {
			t.Errorf("%s: %q: no flag %s in its help", page, line, name)
		}
	}
}
