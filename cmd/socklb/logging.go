package main

import (
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as kube-proxy
	"k8s.io/klog/v2"
)

// loggingFeatures gates component-base's logging options as kube-proxy's
// default feature gate does: JSON (beta) on, the alpha stream options off.
var loggingFeatures = func() featuregate.MutableVersionedFeatureGate {
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		panic(err)
	}
	return fg
}()

// startLogging applies --logging-format, -v and --vmodule to klog and
// returns socklb's slog logger writing through it: client-go's klog lines
// and socklb's land in one stream, in one format, with slog's keys kept.
func startLogging(c *logsapi.LoggingConfiguration) (*slog.Logger, func(), error) {
	if err := logsapi.ValidateAndApply(c, loggingFeatures); err != nil {
		return nil, nil, err
	}
	return slog.New(logr.ToSlogHandler(klog.Background())), logs.FlushLogs, nil
}
