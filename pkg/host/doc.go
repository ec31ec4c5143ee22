// Package host reads facts about the node the agent runs on that no API
// object holds: its interface addresses (where NodePorts answer), as a
// list and as a stream of changes, and where cgroup v2 is mounted (the
// default cgroup the hooks serve). It reads /proc and netlink and writes
// nothing; it imports nothing of socklb's, so cmd, the agent and the
// datapath can all use it.
package host
