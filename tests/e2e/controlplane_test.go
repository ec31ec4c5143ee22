package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceCIDR is the API server's --service-cluster-ip-range: ClusterIPs
// are allocated from it, and only ever used inside the lab's namespaces.
const serviceCIDR = "10.96.0.0/16"

// controlPlane is etcd, kube-apiserver and kube-controller-manager, built
// from their Go modules (tests/e2e/tools), listening on 127.0.0.1 only.
type controlPlane struct {
	dir                  string
	tools                string
	etcd, apiserver, kcm *proc
	server               string // https://127.0.0.1:port
	pki                  *pki
	adminToken           string
	adminKubeconfig      string
	admin                kubernetes.Interface
	adminConfig          *rest.Config
}

// startControlPlane starts everything, waits until the API server is ready
// and the controllers run, and stops what it started if anything fails.
func startControlPlane(tools, dir string) (cp *controlPlane, err error) {
	cp = &controlPlane{dir: dir, tools: tools}
	defer func() {
		if err != nil {
			cp.stop()
			cp = nil
		}
	}()
	if cp.pki, err = newPKI(dir); err != nil {
		return cp, fmt.Errorf("certificates: %w", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return cp, err
	}
	cp.adminToken = hex.EncodeToString(tok)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return cp, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return cp, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]

	start := time.Now()
	cp.etcd, err = startProc("etcd", filepath.Join(dir, "etcd.log"), filepath.Join(tools, "etcd"),
		"--name=e2e",
		"--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=e2e=http://127.0.0.1:%d", etcdPeer),
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return cp, err
	}
	etcdHealth := fmt.Sprintf("http://127.0.0.1:%d/health", etcdClient)
	if err := cp.etcd.waitFor("/health", 30*time.Second, func() error {
		return httpOK(http.DefaultClient, etcdHealth, "", `"health":"true"`)
	}); err != nil {
		return cp, err
	}
	logf("etcd (pid %d) ready on 127.0.0.1:%d in %s", cp.etcd.pid(), etcdClient, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	cp.server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.apiserver, err = startProc("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), filepath.Join(tools, "kube-apiserver"),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--service-cluster-ip-range="+serviceCIDR,
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
		"--token-auth-file="+tokens,
		"--tls-cert-file="+cp.pki.serverCert,
		"--tls-private-key-file="+cp.pki.serverKey,
		"--client-ca-file="+cp.pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+cp.pki.saPub,
		"--service-account-signing-key-file="+cp.pki.saKey,
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		// deploy/daemonset.yaml is privileged, as a BPF agent must be.
		"--allow-privileged=true",
		"--v=1",
	)
	if err != nil {
		return cp, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := cp.apiserver.waitFor("/readyz", 90*time.Second, func() error {
		return httpOK(hc, cp.server+"/readyz", cp.adminToken, "ok")
	}); err != nil {
		return cp, err
	}
	logf("kube-apiserver (pid %d) ready on %s in %s", cp.apiserver.pid(), cp.server, time.Since(start).Round(time.Millisecond))

	cp.adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.adminKubeconfig, cp.server, cp.pki.caPEM, "admin", cp.adminToken); err != nil {
		return cp, err
	}
	if cp.adminConfig, err = clientcmd.BuildConfigFromFlags("", cp.adminKubeconfig); err != nil {
		return cp, err
	}
	cp.adminConfig.QPS, cp.adminConfig.Burst = 200, 400
	if cp.admin, err = kubernetes.NewForConfig(cp.adminConfig); err != nil {
		return cp, err
	}

	start = time.Now()
	cp.kcm, err = startProc("kube-controller-manager", filepath.Join(dir, "kube-controller-manager.log"), filepath.Join(tools, "kube-controller-manager"),
		"--kubeconfig="+cp.adminKubeconfig,
		// The EndpointSlice controller makes the slices socklb reads; the
		// ServiceAccount controller makes each namespace's "default"
		// ServiceAccount, without which Pods are refused; the Namespace
		// controller empties deleted namespaces.
		"--controllers=endpointslice-controller,serviceaccount-controller,namespace-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	)
	if err != nil {
		return cp, err
	}
	ctx := context.Background()
	if err := cp.kcm.waitFor("the default ServiceAccount", 60*time.Second, func() error {
		_, err := cp.admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return cp, err
	}
	// The Priority admission plugin needs the built-in classes that the
	// API server creates at start; deploy/ uses system-node-critical.
	if err := cp.apiserver.waitFor("PriorityClass system-node-critical", 30*time.Second, func() error {
		_, err := cp.admin.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
		return err
	}); err != nil {
		return cp, err
	}
	logf("kube-controller-manager (pid %d) running in %s", cp.kcm.pid(), time.Since(start).Round(time.Millisecond))
	return cp, nil
}

// stop stops every process by PID, controllers first, etcd last.
func (cp *controlPlane) stop() {
	if cp == nil {
		return
	}
	cp.kcm.stop(10 * time.Second)
	cp.apiserver.stop(15 * time.Second)
	cp.etcd.stop(10 * time.Second)
}

// alive returns an error if a control plane process died.
func (cp *controlPlane) alive() error {
	for _, p := range []*proc{cp.etcd, cp.apiserver, cp.kcm} {
		if !p.alive() {
			return p.exitedErr()
		}
	}
	return nil
}

func (cp *controlPlane) logTails(n int) string {
	var b strings.Builder
	for _, p := range []*proc{cp.etcd, cp.apiserver, cp.kcm} {
		if p != nil {
			fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", p.logPath, p.tail(n))
		}
	}
	return b.String()
}

func httpOK(c *http.Client, url, token, want string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// writeKubeconfig writes a kubeconfig that authenticates with a bearer token.
func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
