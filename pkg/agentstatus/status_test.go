package agentstatus

import "testing"

// TestHealth: the one-word summary `kubectl socklb status` prints and
// exits on is OK only for a healthy, fully programmed agent whose maps
// have room, and names each problem otherwise.
func TestHealth(t *testing.T) {
	ok := Status{Healthz: 200, Frontends: 3, FrontendsProgrammed: 3, Backends: 5, BackendsProgrammed: 5, MapPressure: map[string]float64{"services": 0.1}}
	for _, c := range []struct {
		name   string
		edit   func(*Status)
		want   string
		synced bool
	}{
		{"healthy", func(*Status) {}, "OK", true},
		{"unreachable", func(s *Status) { s.Healthz = 0 }, "healthz unreachable", false},
		{"503", func(s *Status) { s.Healthz = 503 }, "healthz 503", false},
		{"behind", func(s *Status) { s.FrontendsProgrammed = 1 }, "2 frontends not programmed", false},
		{"full map", func(s *Status) { s.MapPressure["backends"] = 0.95 }, "map nearly full", true},
		{"a part unreadable", func(s *Status) { s.Errors = []string{"/metrics: refused"} }, "partial", true},
	} {
		s := ok
		s.MapPressure = map[string]float64{"services": 0.1}
		c.edit(&s)
		if got := s.Health(); got != c.want {
			t.Errorf("%s: Health() = %q, want %q", c.name, got, c.want)
		}
		if s.Synced() != c.synced {
			t.Errorf("%s: Synced() = %v", c.name, s.Synced())
		}
	}
	if name, p := (Status{MapPressure: map[string]float64{"a": 0.5, "b": 0.7, "c": 0.7}}).MaxPressure(); name != "b" || p != 0.7 {
		t.Errorf("MaxPressure = %s %v, want b 0.7 (the first of the fullest, by name)", name, p)
	}
}
