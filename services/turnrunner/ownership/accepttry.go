package ownership

import "time"

// acceptTryWait is how long try (from 0) of Accept's lease write waits for
// its answer before the write is sent again: acceptTry, then twice as long
// each time, up to acceptTryMax. A server that dropped the request
// (an election) costs the first try a second; a server whose writes
// queue up behind a burst (each fsynced) answers later than any fixed
// bound, and a try that always gave up before its answer came would
// never see the lease it wrote, only add another write to the queue
// each second until the start failed (issue 23: lease writes of 5 s
// and more under 220 starts at once).
func acceptTryWait(try int) time.Duration {
	if try >= 4 {
		return acceptTryMax
	}
	return min(acceptTry<<try, acceptTryMax)
}

// acceptTryMax bounds one try of Accept's lease write.
const acceptTryMax = 8 * time.Second
