// Package transcript holds the pure algorithms behind the sessions API: it
// parses a session file's bytes (JSONL: an optional meta line, then message
// and tool-event lines) and derives from them what the HTTP routes return —
// the session listing entry, the heuristic summary, search hits, the
// Markdown export, the tool timeline and the post-session summary — plus the
// two rewrites the API performs on a file (setting the summary, renaming).
//
// Nothing here touches the disk or the clock except where documented:
// callers read the file, pass its bytes and its mtime, and write back what a
// rewrite helper returns.
//
// Text lengths, truncations and snippet windows are counted in UTF-16 code
// units because the clients were written against JavaScript string lengths;
// counting runes or bytes would move every cut point on non-ASCII text.
package transcript
