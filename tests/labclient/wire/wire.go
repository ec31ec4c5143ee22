// Package wire holds the JSON shape printed by the labclient binary, shared
// by the labclient main and by the internal/lab library that parses it.
package wire

// Result is the one JSON object labclient prints on stdout for every
// subcommand. Fields that a subcommand does not fill are omitted.
type Result struct {
	// Mode is the subcommand: tcp, udp, udp-connected, loop, info.
	Mode string `json:"mode"`
	// Addr is the destination as given on the command line.
	Addr string `json:"addr,omitempty"`
	// Attempts counts connects (tcp, loop) or queries (udp*).
	Attempts int `json:"attempts"`
	// OK counts attempts that got a reply.
	OK int `json:"ok"`
	// Replies counts replies by the answering pod name.
	Replies map[string]int `json:"replies"`
	// Errors counts failures by errno name (ECONNREFUSED, ENETUNREACH, ...),
	// or "timeout", "EOF", "other".
	Errors map[string]int `json:"errors"`
	// Peer is getpeername() of the first successful socket (tcp,
	// udp-connected): the ClusterIP when socklb works.
	Peer string `json:"peer,omitempty"`
	// Peers is the sorted set of getpeername() results after every reply
	// (udp-connected): a socket held across an agent upgrade must keep
	// showing the ClusterIP.
	Peers []string `json:"peers,omitempty"`
	// Sources is the sorted set of reply source addresses (udp): the
	// ClusterIP when socklb works.
	Sources []string `json:"sources,omitempty"`
	// Sequence lists the answering pod (or error name) for each attempt, in
	// order; only with --seq.
	Sequence []string `json:"sequence,omitempty"`
	// Duration is the wall time spent, as a Go duration string.
	Duration string `json:"duration,omitempty"`
	// Cgroup is the process's cgroup v2 path (info).
	Cgroup string `json:"cgroup,omitempty"`
	// Pid is the process id (info).
	Pid int `json:"pid,omitempty"`
	// NetNS is the readlink of /proc/self/ns/net (info).
	NetNS string `json:"netns,omitempty"`
	// LongestGap is the longest time between two successful attempts (or
	// from the start to the first one), as a Go duration string: how long
	// an outage in the middle of a loop lasted, which counts alone do not
	// tell when attempts fail faster than they succeed.
	LongestGap string `json:"longest_gap,omitempty"`
	// FailedFrom is when the first failed attempt ended and FailedUntil
	// when the last one began (loop only; RFC 3339 with nanoseconds, this
	// machine's clock). Whatever failed them held at some moment no later
	// than FailedFrom and at some moment no earlier than FailedUntil, so a
	// test compares them with the times of its own events (an agent
	// stopped, an agent ready) to tell when connects failed, however the
	// scheduler delayed the client around each connect.
	FailedFrom  string `json:"failed_from,omitempty"`
	FailedUntil string `json:"failed_until,omitempty"`
	// FirstError is the text of the first error seen, for debugging.
	FirstError string `json:"first_error,omitempty"`
}

// TotalErrors returns the sum of all error counts.
func (r *Result) TotalErrors() int {
	n := 0
	for _, v := range r.Errors {
		n += v
	}
	return n
}
