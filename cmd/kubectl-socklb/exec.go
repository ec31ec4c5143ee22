package main

import (
	"bytes"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// exec runs command in the agent container of p, as `kubectl exec` does:
// WebSocket first, SPDY for API servers that predate it.
func (c *cluster) exec(ctx context.Context, p *corev1.Pod, command []string, stdout, stderr io.Writer) error {
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: agentContainer, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.config, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.config, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

// execOutput runs command and returns its stdout; the error carries its
// stderr and names the pod.
func (c *cluster) execOutput(ctx context.Context, p *corev1.Pod, command []string) ([]byte, error) {
	var out, errOut bytes.Buffer
	err := c.run(ctx, p, command, &out, &errOut)
	if err != nil {
		err = fmt.Errorf("%v in pod %s/%s on node %s: %w%s", command, p.Namespace, p.Name, p.Spec.NodeName, err, trimmed(errOut.String()))
	}
	return out.Bytes(), err
}

func trimmed(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if s == "" {
		return ""
	}
	return ": " + s
}
