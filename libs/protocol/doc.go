// Package protocol is the bus contract of Waggle core: every NATS subject,
// stream and bucket name, the messages that cross the bus, the error kinds
// that survive the trip, and the ID rule that keeps user input out of
// subjects, file paths and KV keys.
//
// It imports the standard library only, so every module can depend on it and
// nothing else formats a subject string.
package protocol
