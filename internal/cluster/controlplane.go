package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
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

	"github.com/socklb/socklb/internal/testkit"
)

// ServiceCIDR is the API server's --service-cluster-ip-range: ClusterIPs
// are allocated from it, and only ever used inside the lab's namespaces.
const ServiceCIDR = "10.96.0.0/16"

// KubernetesServiceIP is the ClusterIP the API server gives the
// `kubernetes` Service: the first address of ServiceCIDR.
const KubernetesServiceIP = "10.96.0.1"

// Options change how Start runs the control plane. The zero value is what
// tests/e2e and the benchmarks use: everything on 127.0.0.1, the
// `kubernetes` Service without endpoints, and only the controllers that
// make EndpointSlices, ServiceAccounts and empty deleted namespaces.
type Options struct {
	// Address the API server binds and advertises (default 127.0.0.1).
	// A real node (tests/node) gives an address its pods reach on-link, so
	// the `kubernetes` Service gets that endpoint (lease reconciler).
	Address string
	// Controllers of kube-controller-manager, its --controllers value.
	Controllers string
	// Scheduler also starts kube-scheduler: pods are bound by it, not by
	// the test.
	Scheduler bool
	// ServiceCIDR replaces the package's ServiceCIDR: a /16 holds 65 534
	// ClusterIPs, too few for the benchmark's 100 000 Services.
	ServiceCIDR string
}

// DefaultControllers: the EndpointSlice controller makes the slices socklb
// reads; the ServiceAccount controller makes each namespace's "default"
// ServiceAccount, without which Pods are refused; the Namespace controller
// empties deleted namespaces.
const DefaultControllers = "endpointslice-controller,serviceaccount-controller,namespace-controller"

// ControlPlane is etcd, kube-apiserver and kube-controller-manager, built
// from their Go modules (tests/e2e/tools), listening on 127.0.0.1 only.
type ControlPlane struct {
	Dir                  string // logs, etcd data, certificates
	Tools                string // where the binaries are
	Etcd, APIServer, KCM *testkit.Proc
	Scheduler            *testkit.Proc // only with Options.Scheduler
	Server               string        // https://127.0.0.1:port
	EtcdURL              string        // http://127.0.0.1:port, etcd's client URL
	PKI                  *PKI
	AdminToken           string
	AdminKubeconfig      string
	Admin                kubernetes.Interface
	AdminConfig          *rest.Config

	apiArgs []string // to restart the API server on the same port and etcd
	kcmArgs []string // to restart the controllers
}

// Start starts everything with the default Options.
func Start(tools, dir string) (*ControlPlane, error) {
	return StartWith(tools, dir, Options{})
}

// StartWith starts everything, waits until the API server is ready and the
// controllers run, and stops what it started if anything fails.
func StartWith(tools, dir string, o Options) (cp *ControlPlane, err error) {
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if o.Controllers == "" {
		o.Controllers = DefaultControllers
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = ServiceCIDR
	}
	cp = &ControlPlane{Dir: dir, Tools: tools}
	defer func() {
		if err != nil {
			cp.Stop()
			cp = nil
		}
	}()
	if cp.PKI, err = NewPKI(dir, net.ParseIP(o.Address)); err != nil {
		return cp, fmt.Errorf("certificates: %w", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return cp, err
	}
	cp.AdminToken = hex.EncodeToString(tok)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.AdminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return cp, err
	}
	ports, err := testkit.FreePorts(3)
	if err != nil {
		return cp, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]

	start := time.Now()
	cp.Etcd, err = testkit.StartProc("etcd", filepath.Join(dir, "etcd.log"), filepath.Join(tools, "etcd"),
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
	cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	etcdHealth := cp.EtcdURL + "/health"
	if err := cp.Etcd.WaitFor("/health", 30*time.Second, func() error {
		return HTTPOK(http.DefaultClient, etcdHealth, "", `"health":"true"`)
	}); err != nil {
		return cp, err
	}
	Logf("etcd (pid %d) ready on 127.0.0.1:%d in %s", cp.Etcd.Pid(), etcdClient, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	cp.Server = fmt.Sprintf("https://%s", net.JoinHostPort(o.Address, fmt.Sprint(apiPort)))
	reconciler := "none"
	var nodeArgs []string
	if o.Address != "127.0.0.1" {
		reconciler = "lease"
		// exec, logs and port-forward reach the kubelet by address: a
		// node's hostname resolves nowhere here.
		nodeArgs = append(nodeArgs, "--kubelet-preferred-address-types=InternalIP")
	}
	cp.apiArgs = []string{
		"--bind-address=" + o.Address,
		"--advertise-address=" + o.Address,
		fmt.Sprintf("--secure-port=%d", apiPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--endpoint-reconciler-type=" + reconciler,
		"--authorization-mode=RBAC",
		"--token-auth-file=" + tokens,
		"--tls-cert-file=" + cp.PKI.ServerCert,
		"--tls-private-key-file=" + cp.PKI.ServerKey,
		"--client-ca-file=" + cp.PKI.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.PKI.SAPub,
		"--service-account-signing-key-file=" + cp.PKI.SAKey,
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		// deploy/base/daemonset.yaml is privileged, as a BPF agent must be.
		"--allow-privileged=true",
		"--v=1",
	}
	cp.apiArgs = append(cp.apiArgs, nodeArgs...)
	cp.APIServer, err = testkit.StartProc("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), filepath.Join(tools, "kube-apiserver"), cp.apiArgs...)
	if err != nil {
		return cp, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.PKI.CAPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := cp.APIServer.WaitFor("/readyz", 90*time.Second, func() error {
		return HTTPOK(hc, cp.Server+"/readyz", cp.AdminToken, "ok")
	}); err != nil {
		return cp, err
	}
	Logf("kube-apiserver (pid %d) ready on %s in %s", cp.APIServer.Pid(), cp.Server, time.Since(start).Round(time.Millisecond))

	cp.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.AdminKubeconfig, cp.Server, cp.PKI.CAPEM, "admin", cp.AdminToken); err != nil {
		return cp, err
	}
	if cp.AdminConfig, err = clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig); err != nil {
		return cp, err
	}
	cp.AdminConfig.QPS, cp.AdminConfig.Burst = 200, 400
	if cp.Admin, err = kubernetes.NewForConfig(cp.AdminConfig); err != nil {
		return cp, err
	}

	start = time.Now()
	cp.kcmArgs = []string{
		"--kubeconfig=" + cp.AdminKubeconfig,
		"--controllers=" + o.Controllers,
		// Signs the ServiceAccount tokens of controllers that use their own
		// credentials (with the full controller set).
		"--root-ca-file=" + cp.PKI.CACert,
		"--service-account-private-key-file=" + cp.PKI.SAKey,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}
	cp.KCM, err = testkit.StartProc("kube-controller-manager", filepath.Join(dir, "kube-controller-manager.log"), filepath.Join(tools, "kube-controller-manager"), cp.kcmArgs...)
	if err != nil {
		return cp, err
	}
	ctx := context.Background()
	if err := cp.KCM.WaitFor("the default ServiceAccount", 60*time.Second, func() error {
		_, err := cp.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return cp, err
	}
	// The Priority admission plugin needs the built-in classes that the
	// API server creates at start; deploy/ uses system-node-critical.
	if err := cp.APIServer.WaitFor("PriorityClass system-node-critical", 30*time.Second, func() error {
		_, err := cp.Admin.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
		return err
	}); err != nil {
		return cp, err
	}
	Logf("kube-controller-manager (pid %d) running in %s", cp.KCM.Pid(), time.Since(start).Round(time.Millisecond))
	if o.Scheduler {
		cp.Scheduler, err = testkit.StartProc("kube-scheduler", filepath.Join(dir, "kube-scheduler.log"), filepath.Join(tools, "kube-scheduler"),
			"--kubeconfig="+cp.AdminKubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--v=1",
		)
		if err != nil {
			return cp, err
		}
		Logf("kube-scheduler (pid %d) started", cp.Scheduler.Pid())
	}
	return cp, nil
}

// Stop stops every process by PID, controllers first, etcd last.
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	cp.Scheduler.Stop(10 * time.Second)
	cp.KCM.Stop(10 * time.Second)
	cp.APIServer.Stop(15 * time.Second)
	cp.Etcd.Stop(10 * time.Second)
}

// Alive returns an error if a control plane process died.
func (cp *ControlPlane) Alive() error {
	for _, p := range []*testkit.Proc{cp.Etcd, cp.APIServer, cp.KCM, cp.Scheduler} {
		if p != nil && !p.Alive() {
			return p.ExitedErr()
		}
	}
	return nil
}

// LogTails returns the last n lines of each process's log.
func (cp *ControlPlane) LogTails(n int) string {
	var b strings.Builder
	for _, p := range []*testkit.Proc{cp.Etcd, cp.APIServer, cp.KCM, cp.Scheduler} {
		if p != nil {
			fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", p.LogPath, p.Tail(n))
		}
	}
	return b.String()
}

// HTTPOK GETs url (with a bearer token unless empty) and wants a 200 whose
// body contains want.
func HTTPOK(c *http.Client, url, token, want string) error {
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

// WriteKubeconfig writes a kubeconfig that authenticates with a bearer token.
func WriteKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

// IgnoreNotFound returns nil for a NotFound API error.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
