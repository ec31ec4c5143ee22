package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// agentSelector and agentNamespace are deploy/'s and the chart's.
	agentSelector  = "app.kubernetes.io/name=socklb"
	agentNamespace = "kube-system"
	agentContainer = "socklb"
)

type options struct {
	flags    *genericclioptions.ConfigFlags
	streams  genericiooptions.IOStreams
	selector string
}

type cluster struct {
	config    *rest.Config
	client    kubernetes.Interface
	namespace string
	selector  string
	// run runs a command in a pod's agent container: exec, or a fake in
	// the tests.
	run func(ctx context.Context, p *corev1.Pod, command []string, stdout, stderr io.Writer) error
}

func (o *options) cluster() (*cluster, error) {
	config, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	ns, explicit, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	// The agents live in kube-system whatever the context's namespace.
	if !explicit {
		ns = agentNamespace
	}
	c := &cluster{config: config, client: client, namespace: ns, selector: o.selector}
	c.run = c.exec
	return c, nil
}

// agentPods lists the agent pods, sorted by node.
func (c *cluster) agentPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: c.selector})
	if err != nil {
		return nil, fmt.Errorf("listing socklb's pods (%s) in namespace %s: %w", c.selector, c.namespace, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no socklb pod (%s) in namespace %s: is socklb installed (kubectl apply -k deploy/, or helm install socklb charts/socklb -n kube-system)? "+
			"Installed elsewhere: pass -n NAMESPACE", c.selector, c.namespace)
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Spec.NodeName != pods[j].Spec.NodeName {
			return pods[i].Spec.NodeName < pods[j].Spec.NodeName
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, nil
}

// podOnNode picks the agent pod of node, or, with no node, the only one.
func podOnNode(pods []corev1.Pod, node string) (*corev1.Pod, error) {
	nodes := make([]string, 0, len(pods))
	for i := range pods {
		if pods[i].Spec.NodeName == node && node != "" {
			return &pods[i], nil
		}
		n := pods[i].Spec.NodeName
		if n == "" {
			n = "(unscheduled) " + pods[i].Name
		}
		nodes = append(nodes, n)
	}
	if node == "" {
		if len(pods) == 1 {
			return &pods[0], nil
		}
		return nil, fmt.Errorf("socklb runs on %d nodes (%s): choose one with --node NODE", len(pods), strings.Join(nodes, ", "))
	}
	return nil, fmt.Errorf("no socklb pod on node %q; socklb's pods run on: %s (a node missing there may be excluded by the DaemonSet's nodeSelector)", node, strings.Join(nodes, ", "))
}

// runnable says why exec into p cannot work, or nil.
func runnable(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s/%s on node %s is %s%s, not Running: see `kubectl -n %s describe pod %s` and `kubectl -n %s logs %s -c %s`",
			p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, waitingReason(p), p.Namespace, p.Name, p.Namespace, p.Name, agentContainer)
	}
	return nil
}

// waitingReason is the agent container's waiting reason (CrashLoopBackOff,
// ImagePullBackOff, ...), the first thing an operator needs.
func waitingReason(p *corev1.Pod) string {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range statuses {
			if w := s.State.Waiting; w != nil && w.Reason != "" {
				return fmt.Sprintf(" (%s: %s)", s.Name, w.Reason)
			}
		}
	}
	if p.Status.Reason != "" {
		return " (" + p.Status.Reason + ")"
	}
	return ""
}
