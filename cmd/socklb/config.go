package main

import (
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/socklb/socklb/pkg/agent"
	"github.com/socklb/socklb/pkg/datapath"
)

const (
	configAPIVersion = "socklb.io/v1alpha1"
	configKind       = "SocklbConfiguration"
)

// SocklbConfiguration is the agent's versioned config file (--config), as
// KubeProxyConfiguration is kube-proxy's: one field per agent flag, named
// as the flag in camelCase. Flags given on the command line override it.
type SocklbConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// API source.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Manifests  string `json:"manifests,omitempty"`
	// NodeName empty means $NODE_NAME, else the hostname: a file shared
	// by every node leaves it out.
	NodeName string `json:"nodeName,omitempty"`

	// Datapath.
	CgroupPath  string `json:"cgroupPath,omitempty"`
	BPFFSPath   string `json:"bpffsPath"`
	MaxServices uint   `json:"maxServices"`
	MaxBackends uint   `json:"maxBackends"`
	MaxRevNAT   uint   `json:"maxRevNAT,omitempty"`
	MaxAffinity uint   `json:"maxAffinity"`
	// MapMemoryBudget bounds how far the maps maxServices and
	// maxBackends size may grow on their own (a quantity: "2Gi").
	MapMemoryBudget       string   `json:"mapMemoryBudget"`
	SocketLBHostNSOnly    bool     `json:"socketLBHostNSOnly"`
	TerminateSockets      string   `json:"terminateSockets"`
	DisableKernelFeatures []string `json:"disableKernelFeatures,omitempty"`
	NodePortAddresses     []string `json:"nodePortAddresses,omitempty"`
	PacketLB              bool     `json:"packetLB"`
	Devices               []string `json:"devices,omitempty"`
	MaxFlows              uint     `json:"maxFlows"`
	MaxSockets            uint     `json:"maxSockets"`
	NATPortRange          string   `json:"natPortRange"`
	// Conntrack timeouts kube-proxy sets on the node; 0 leaves them.
	ConntrackTCPEstablished metav1.Duration `json:"conntrackTCPTimeoutEstablished"`
	ConntrackTCPCloseWait   metav1.Duration `json:"conntrackTCPTimeoutCloseWait"`
	// ProcSysNet is where the node's net sysctls are read and written.
	ProcSysNet       string          `json:"procSysNet"`
	LockTimeout      metav1.Duration `json:"lockTimeout"`
	PinCheckInterval metav1.Duration `json:"pinCheckInterval"`

	// Health and metrics.
	HealthzBindAddress string          `json:"healthzBindAddress"`
	HealthzTimeout     metav1.Duration `json:"healthzTimeout"`
	MetricsBindAddress string          `json:"metricsBindAddress"`
	PerServiceMetrics  bool            `json:"perServiceMetrics"`

	// Security.
	ExternalIPCIDRs      []string `json:"externalIPCIDRs,omitempty"`
	Profiling            bool     `json:"profiling"`
	ProfilingAllowRemote bool     `json:"profilingAllowRemote"`

	// Logging is component-base's, as in KubeProxyConfiguration.
	Logging logsapi.LoggingConfiguration `json:"logging"`
}

// defaultConfig is what the agent runs with when neither a flag nor the
// file sets a field: kube-proxy's ports and socklb's map sizes.
func defaultConfig() *SocklbConfiguration {
	c := &SocklbConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: configAPIVersion, Kind: configKind},
		BPFFSPath:          defaultBPFFS,
		MaxServices:        datapath.DefaultMaxServices,
		MaxBackends:        datapath.DefaultMaxBackends,
		MaxAffinity:        datapath.DefaultMaxAffinity,
		MapMemoryBudget:    datapath.DefaultGrowBudget,
		MaxFlows:           datapath.DefaultMaxFlows,
		MaxSockets:         datapath.DefaultMaxSockets,
		ProcSysNet:         "/proc/sys/net",
		NATPortRange:       fmt.Sprintf("%d-%d", datapath.DefaultNATPortMin, datapath.DefaultNATPortMax),
		TerminateSockets:   string(datapath.TerminateUDP),
		LockTimeout:        metav1.Duration{Duration: datapath.DefaultLockTimeout},
		PinCheckInterval:   metav1.Duration{Duration: agent.DefaultPinCheckInterval},
		HealthzBindAddress: "0.0.0.0:10256",
		HealthzTimeout:     metav1.Duration{Duration: defaultHealthzTimeout},
		MetricsBindAddress: "127.0.0.1:10249",
	}
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	return c
}

// loadConfigFile decodes path over the defaults. Decoding is strict, as
// kube-proxy's: a misspelt field would otherwise be silently ignored and
// its default used, and a field given twice would silently take its last
// value. read is os.ReadFile, or for `socklb status` a read through a
// running agent's root.
func loadConfigFile(path string, read func(string) ([]byte, error)) (*SocklbConfiguration, error) {
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if tm.APIVersion != configAPIVersion || tm.Kind != configKind {
		return nil, fmt.Errorf("--config %s: apiVersion %q kind %q: want apiVersion: %s and kind: %s", path, tm.APIVersion, tm.Kind, configAPIVersion, configKind)
	}
	if err := duplicateKey(data); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	// sigs.k8s.io/json, as the API server's strict decoding: its errors
	// name the field by its path (logging.formatt), case-sensitively.
	c := defaultConfig()
	strict, err := sigsjson.UnmarshalStrict(js, c, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w (`socklb agent --write-config-to FILE` writes every field)", path, err)
	}
	return c, nil
}

// writeConfigFile writes c as a file --config reads back.
func writeConfigFile(path string, c *SocklbConfiguration) error {
	out := *c
	out.TypeMeta = metav1.TypeMeta{APIVersion: configAPIVersion, Kind: configKind}
	data, err := yaml.Marshal(&out)
	if err != nil {
		return fmt.Errorf("--write-config-to: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--write-config-to: %w", err)
	}
	return nil
}
