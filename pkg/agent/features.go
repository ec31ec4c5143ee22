package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/socklb/socklb/pkg/datapath"
)

// setFeatures exports which optional kernel features the datapath uses, as
// socklb_kernel_feature_enabled{feature}: 1 in use, 0 missing or off (the
// agent log says why and what is lost). Called once, after the datapath
// opened.
func (m *Metrics) setFeatures(feats map[datapath.Feature]error) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "socklb_kernel_feature_enabled",
		Help: "Optional kernel features in use (1) or missing or switched off (0): set_retval (the errno of a refused connect), sock_destroy (sockets of removed backends destroyed).",
	}, []string{"feature"})
	for _, f := range datapath.AllFeatures {
		v := 0.0
		if feats[f] == nil {
			v = 1
		}
		g.WithLabelValues(string(f)).Set(v)
	}
	return m.Registry.Register(g)
}
