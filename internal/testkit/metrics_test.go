package testkit

import "testing"

// TestSample: a sample is found by its whole name, labels included, never
// by a prefix of a longer metric's name (the _count of a histogram is not
// its _count_total, a counter is not its _bucket).
func TestSample(t *testing.T) {
	body := `# HELP socklb_pins_repaired_total Pins re-created.
# TYPE socklb_pins_repaired_total counter
socklb_pins_repaired_total_extra 7
socklb_pins_repaired_total 1
socklb_kernel_feature_enabled{feature="set_retval"} 0
socklb_kernel_feature_enabled{feature="sock_destroy"} 1
socklb_bad NaNx
`
	for _, tc := range []struct {
		name   string
		want   float64
		wantOK bool
	}{
		{"socklb_pins_repaired_total", 1, true},
		{`socklb_kernel_feature_enabled{feature="sock_destroy"}`, 1, true},
		{`socklb_kernel_feature_enabled{feature="set_retval"}`, 0, true},
		{"socklb_pins_repaired", 0, false},
		{"socklb_missing", 0, false},
		{"socklb_bad", 0, false},
	} {
		got, ok := Sample(body, tc.name)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Sample(%s) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
