//go:build unix

package main

import "syscall"

// privateUmask makes everything this process creates private to its
// owner (0700 dirs, 0600 files) whatever mode a writer asks for: a second
// line of defence behind the writers' own modes for the data dir, which
// holds chats, memories and API keys. Children (tools, MCP servers)
// inherit it.
func privateUmask() { syscall.Umask(0o077) }
