//go:build race

package load

// raceEnabled: the race detector slows the server 5–20×, which turns these
// load tests into tests of the detector. make test runs this package in a
// second pass without it.
const raceEnabled = true
