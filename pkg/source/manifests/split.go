package manifests

import "bytes"

// document is one YAML document of a file and where it starts, so that a
// problem can send the user to the right line.
type document struct {
	index int // 1-based, among the file's non-blank documents
	line  int // 1-based line of the document's first line
	body  []byte
}

// splitDocuments cuts a file at YAML document separators. It does what
// apimachinery's YAMLReader does, but keeps line numbers, and it keeps a
// "--- <content>" line as the first line of the next document instead of
// failing on it. Blank documents (a leading "---", "---" twice) are dropped;
// comment-only ones are kept and the decoder skips them.
func splitDocuments(data []byte) []document {
	var docs []document
	add := func(line int, body []byte) {
		if len(bytes.TrimSpace(body)) > 0 {
			docs = append(docs, document{index: len(docs) + 1, line: line, body: body})
		}
	}
	start, startLine := 0, 1
	for pos, line := 0, 1; pos < len(data); line++ {
		end := len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		if sep, rest := separator(data[pos:end]); sep {
			add(startLine, data[start:pos])
			if rest {
				start, startLine = pos, line
			} else {
				start, startLine = end, line+1
			}
		}
		pos = end
	}
	add(startLine, data[start:])
	return docs
}

// separator reports whether line starts a new document, and whether it also
// carries content ("--- !!map", "--- {a: 1}") that belongs to that document.
func separator(line []byte) (sep, content bool) {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	if !ok {
		return false, false
	}
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' && rest[0] != '\r' {
		return false, false // "----" or "---x" is text, not a separator
	}
	rest = bytes.TrimSpace(rest)
	return true, len(rest) > 0 && rest[0] != '#'
}
