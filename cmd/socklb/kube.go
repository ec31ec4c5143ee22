package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
	"github.com/socklb/socklb/pkg/source/kube"
)

func newKubeSource(f agentFlags) (func(model.ReportFunc) (source.Source, error), error) {
	cfg, err := kube.RESTConfig(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "socklb/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API client: %w", err)
	}
	return func(report model.ReportFunc) (source.Source, error) {
		return kube.New(client, kube.Config{NodeName: f.nodeName, Report: report})
	}, nil
}
