package e2e

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// rendered is what `kubectl kustomize` makes of one of deployDirs.
type rendered struct {
	ds         *appsv1.DaemonSet
	configMaps map[string]*corev1.ConfigMap
}

func render(t *testing.T, dir string) rendered {
	t.Helper()
	out, err := kubectl("kustomize", filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return decodeRendered(t, dir, out)
}

func decodeRendered(t *testing.T, what, out string) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}}
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		switch meta.Kind {
		case "DaemonSet":
			r.ds = &appsv1.DaemonSet{}
			if err := yaml.UnmarshalStrict([]byte(doc), r.ds); err != nil {
				t.Fatalf("%s: DaemonSet: %v", what, err)
			}
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict([]byte(doc), cm); err != nil {
				t.Fatalf("%s: ConfigMap: %v", what, err)
			}
			r.configMaps[cm.Name] = cm
		}
	}
	if r.ds == nil {
		t.Fatalf("%s renders no DaemonSet", what)
	}
	return r
}

// agentPorts returns the ports of --healthz-bind-address and
// --metrics-bind-address and the container's named ports.
func agentPorts(t *testing.T, c corev1.Container) (bind, named map[string]string) {
	t.Helper()
	bind, named = map[string]string{}, map[string]string{}
	for _, a := range c.Args {
		for _, name := range []string{"healthz", "metrics"} {
			if v, ok := strings.CutPrefix(a, "--"+name+"-bind-address="); ok {
				_, port, err := net.SplitHostPort(v)
				if err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				bind[name] = port
			}
		}
	}
	for _, p := range c.Ports {
		named[p.Name] = strconv.Itoa(int(p.ContainerPort))
	}
	return bind, named
}

// TestDeployOverlays: each overlay does what docs/install.md says it does,
// and its declared ports (which the probes use by name) are the ones the
// agent listens on.
func TestDeployOverlays(t *testing.T) {
	needCluster(t)
	kubeProxyPorts := map[string]string{"healthz": "10256", "metrics": "10249"}
	for _, dir := range deployDirs {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			c := r.ds.Spec.Template.Spec.Containers[0]
			bind, named := agentPorts(t, c)
			for name := range kubeProxyPorts {
				if bind[name] == "" || bind[name] != named[name] {
					t.Errorf("--%s-bind-address port %q, container port %q named %s: the probes and readers would look elsewhere", name, bind[name], named[name], name)
				}
			}
			beside := strings.HasSuffix(dir, "beside-kube-proxy")
			for name, kp := range kubeProxyPorts {
				if clash := bind[name] == kp; clash == beside {
					t.Errorf("%s: socklb's %s port is %s (kube-proxy's is %s): beside kube-proxy it must move, otherwise it must be kube-proxy's", dir, name, bind[name], kp)
				}
			}
			host, port := apiServerEnv(r, c)
			if strings.HasSuffix(dir, "replace-kube-proxy") {
				if host == "" || port == "" {
					t.Errorf("%s: no KUBERNETES_SERVICE_HOST/PORT for the agent: without kube-proxy it cannot reach the API server through the kubernetes Service", dir)
				}
			} else if host != "" || port != "" {
				t.Errorf("%s sets KUBERNETES_SERVICE_HOST=%q PORT=%q: only replace-kube-proxy needs them", dir, host, port)
			}
		})
	}
}

// apiServerEnv resolves KUBERNETES_SERVICE_HOST and _PORT as the kubelet
// would from the rendered objects: env over envFrom.
func apiServerEnv(r rendered, c corev1.Container) (host, port string) {
	vars := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			if cm := r.configMaps[from.ConfigMapRef.Name]; cm != nil {
				for k, v := range cm.Data {
					vars[from.Prefix+k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		vars[e.Name] = e.Value
	}
	return vars["KUBERNETES_SERVICE_HOST"], vars["KUBERNETES_SERVICE_PORT"]
}
