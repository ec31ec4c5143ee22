// Package model holds what the layers of socklb hand each other about the
// API objects: the Input a source delivers and servicemap reads, the
// Problems both find in it, and the well-known labels they select by. It
// imports nothing of socklb's, so a source never depends on servicemap and
// servicemap never on a source; it does no work of its own beyond
// keeping an AddrSet's digest.
package model
