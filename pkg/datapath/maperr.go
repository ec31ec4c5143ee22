package datapath

// MapError is a frontend that could not be written because of one map
// (full, or refusing the write), so a log line or an alert can name the map
// and not only the frontend.
type MapError struct {
	Map string // as the pin directory and bpftool name it: services, backends...
	Err error
}

func (e *MapError) Error() string { return e.Err.Error() }
func (e *MapError) Unwrap() error { return e.Err }
