package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRESTConfigKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("Host = %q", cfg.Host)
	}
	if cfg.ContentType != "application/vnd.kubernetes.protobuf" || !strings.HasPrefix(cfg.AcceptContentTypes, "application/vnd.kubernetes.protobuf,") {
		t.Errorf("content types %q / %q, want protobuf as kube-proxy", cfg.ContentType, cfg.AcceptContentTypes)
	}
}

func TestRESTConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := RESTConfig(missing); err == nil || !strings.Contains(err.Error(), "loading kubeconfig "+missing) {
		t.Errorf("missing kubeconfig: err = %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := RESTConfig("")
	if err == nil || !strings.Contains(err.Error(), "pass --kubeconfig or --manifests DIR") {
		t.Errorf("outside a cluster: err = %v", err)
	}
}
