package kube

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads the kubeconfig at path, or the Pod's service account when
// path is empty.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, errors.New("not running in a cluster and no --kubeconfig given; pass --kubeconfig or --manifests DIR")
	}
	if err != nil {
		return nil, fmt.Errorf("loading in-cluster config (service account): %w", err)
	}
	return cfg, nil
}
