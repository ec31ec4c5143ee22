// Package testkit is the one fixture package of socklb's tests, as
// cilium/ebpf's internal/testutils is of theirs: Kubernetes object
// builders, the root check, a private bpffs, the agent binary and its
// process, and /metrics scraping. Every suite (pkg/* tests,
// tests/integration, tests/e2e, tests/node) and the benchmark use it
// instead of writing their own.
//
// It never attaches a program, creates a namespace or sends traffic: that
// is internal/lab's job. Product code (pkg/, cmd/) imports it only from
// _test.go files.
package testkit
