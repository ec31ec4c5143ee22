// Package manifests is the source that needs no cluster: it reads Services,
// EndpointSlices and Nodes from a directory of manifests (--manifests DIR)
// and follows the directory as it changes.
//
// What is read: every *.yaml, *.yml and *.json file directly in the
// directory (not in subdirectories), following symlinks, so a ConfigMap
// mounted as a volume works. Names starting with "." are skipped: they are
// editor swap and lock files, and the "..data" machinery of ConfigMap mounts.
// A file may hold many YAML documents; "kind: List" and typed lists
// (ServiceList, ...) are expanded. Other kinds are reported and ignored.
// Services and EndpointSlices without a namespace land in "default", as
// kubectl would put them.
//
// When a file is bad: if any document of a file cannot be parsed, the whole
// file keeps the objects it had at its last good read (none, if it never
// read well), and each broken document is reported as a Problem of Kind
// "File" whose Object.Name is the file's path and whose Reason names the
// document, its first line and the error. Keeping the whole file, not just
// its good documents, means a half-saved file never withdraws a Service.
// Unknown kinds and unknown fields are reported too but do not make the file
// bad. Problems are reported once per version of a file's contents.
// A file written in place can still be read half-written (even empty) if
// the writer pauses longer than the debounce, and what parses is taken as
// its contents; write a temporary file and rename it over instead.
//
// When two documents define the same object, the one read last wins (files
// are read in name order) and a Problem of the object's kind says so.
package manifests
