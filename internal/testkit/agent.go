package testkit

// agent is the socklb binary every suite runs, as the DaemonSet does.
var agent = &Binary{Pkg: "./cmd/socklb"}

// BuildAgent builds ./cmd/socklb once per process and returns its path.
func BuildAgent() (string, error) { return agent.Build() }

// RemoveAgent deletes the binary BuildAgent built.
func RemoveAgent() error { return agent.Remove() }
