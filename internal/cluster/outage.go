package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// StopAPIServer stops kube-apiserver (etcd and the controllers stay), as an
// outage or a control-plane upgrade does.
func (cp *ControlPlane) StopAPIServer() {
	cp.APIServer.Stop(10 * time.Second)
}

// StartAPIServer starts kube-apiserver again with the same flags, port and
// etcd, and waits until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	p, err := testkit.StartProc("kube-apiserver", filepath.Join(cp.Dir, fmt.Sprintf("kube-apiserver-%d.log", time.Now().UnixNano())),
		filepath.Join(cp.Tools, "kube-apiserver"), cp.apiArgs...)
	if err != nil {
		return err
	}
	cp.APIServer = p
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.PKI.CAPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return p.WaitFor("/readyz", 90*time.Second, func() error {
		return HTTPOK(hc, cp.Server+"/readyz", cp.AdminToken, "ok")
	})
}

// RestartControllers restarts kube-controller-manager with the same flags.
// After an API server outage its informers retry with a backoff of up to
// 30 s; a test that measures something else after the outage must not
// wait on that.
func (cp *ControlPlane) RestartControllers() error {
	cp.KCM.Stop(10 * time.Second)
	p, err := testkit.StartProc("kube-controller-manager", filepath.Join(cp.Dir, fmt.Sprintf("kube-controller-manager-%d.log", time.Now().UnixNano())),
		filepath.Join(cp.Tools, "kube-controller-manager"), cp.kcmArgs...)
	if err != nil {
		return err
	}
	cp.KCM = p
	return nil
}
