// Package tools provides the built-in tools a turn's agent loop can call —
// file access confined to the workspace's files directory, a shell, memory
// and .docx generation — and the Registry that later tools and team
// policies plug into.
//
// # Confinement
//
// Every path a model passes is relative to Env.FilesDir. A leading "/" does
// not name the host root: "/notes/a.md" is FilesDir/notes/a.md (an absolute
// path that already lies inside FilesDir is accepted as such). Paths are
// opened through os.Root, so "..", absolute symlinks and symlinks that lead
// out of FilesDir are refused with ErrEscape before anything is read or
// created. Messages returned to the model only ever name workspace-relative
// paths.
//
// # Results and errors
//
// Run returns the text the model sees. An error return means the tool could
// not do what was asked; its message is plain (the agent loop prefixes
// "Error executing <tool>: "). The bash tool is the notable case: a command
// that runs and exits non-zero is not an error — its output is returned
// followed by "\n[exit code N]", because a non-zero status (grep finding
// nothing, a failing test) is information for the model, not a tool failure.
// Only a command that cannot be started, times out or is cancelled is an
// error.
package tools
