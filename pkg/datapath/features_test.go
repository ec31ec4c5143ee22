package datapath

import (
	"errors"
	"testing"
)

func TestFeatureProbes(t *testing.T) {
	requireRoot(t)
	// Linux 6.18 here: both present unless switched off.
	if missing, err := probeSetRetval(Config{}); missing != nil || err != nil {
		t.Fatalf("bpf_set_retval probe on this kernel: missing %v, failed %v", missing, err)
	}
	if missing, _ := probeSetRetval(Config{DisableFeatures: []Feature{FeatureSetRetval}}); !errors.Is(missing, errDisabled) {
		t.Fatalf("set_retval disabled: probe says %v", missing)
	}
	d := openTest(t, Config{DisableFeatures: []Feature{FeatureSetRetval}})
	if err := d.Features()[FeatureSetRetval]; !errors.Is(err, errDisabled) {
		t.Fatalf("Features()[set_retval] = %v, want disabled", err)
	}
	if _, err := ParseFeatures("set_retval, sock_destroy"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFeatures("bogus"); err == nil {
		t.Fatal("ParseFeatures accepted an unknown feature")
	}
}
