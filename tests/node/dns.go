package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/oci"
)

// CoreDNSImage is CoreDNS built from its Go module (tests/e2e/tools/build.sh
// --node), the binary alone.
const CoreDNSImage = "localhost/coredns:node"

// ClusterDNS is kube-dns's ClusterIP, kubelet's clusterDNS.
const ClusterDNS = "10.96.0.10"

// CoreDNSImageTarball writes CoreDNS's image.
func CoreDNSImageTarball(bin, out string) error {
	l, err := oci.FilesLayer([]oci.File{{Path: "/coredns", Src: bin, Mode: 0o755}})
	if err != nil {
		return err
	}
	img, err := oci.Image("amd64", []string{"/coredns"}, nil, l)
	if err != nil {
		return err
	}
	return oci.WriteOCI(out, CoreDNSImage, img)
}

// coreDNS is cluster DNS as kubeadm installs it, with nothing to forward
// to: names outside the cluster have no answer here, and no query leaves
// the node. CoreDNS reaches the API server through the `kubernetes`
// Service, so it is installed once a proxy runs, and its queries are
// Service traffic (UDP to a ClusterIP) like every pod's.
const coreDNS = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      containers:
      - name: coredns
        image: localhost/coredns:node
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 60
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: 10.96.0.10
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

// InstallDNS applies CoreDNS and waits until it is Ready, which needs the
// proxy: CoreDNS lists Services through the `kubernetes` ClusterIP.
func (n *Cluster) InstallDNS() error {
	path := filepath.Join(n.Dir, "coredns.yaml")
	if err := os.WriteFile(path, []byte(coreDNS), 0o644); err != nil {
		return err
	}
	if out, err := n.Kubectl("apply", "-f", path); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %v\n%s", path, err, out)
	}
	start := time.Now()
	if err := n.WaitFor("CoreDNS to be Ready", 3*time.Minute, func() error {
		d, err := n.CP.Admin.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%d ready", d.Status.ReadyReplicas)
		}
		return nil
	}); err != nil {
		return err
	}
	cluster.Logf("CoreDNS Ready in %s", time.Since(start).Round(time.Millisecond))
	return nil
}
