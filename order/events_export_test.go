package order

import "time"

// SetHTTPTimeouts shortens Run's server timeouts for a test (read: ReadTimeout; write:
// WriteTimeout, instead of the longest change and its margin); the returned func restores them.
func SetHTTPTimeouts(read, write time.Duration) (restore func()) {
	r, w := readTimeout, writeTimeoutOverride
	readTimeout, writeTimeoutOverride = read, write
	return func() { readTimeout, writeTimeoutOverride = r, w }
}

// StreamWriteTimeout is how long a live stream's write may wait for its reader.
const StreamWriteTimeout = streamWriteTimeout
