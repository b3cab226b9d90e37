package order

import "time"

// SetHTTPTimeouts shortens Run's server timeouts for a test (read: ReadTimeout; margin: what
// WriteTimeout adds to LOCK_TIMEOUT and WORK_DELAY); the returned func restores them.
func SetHTTPTimeouts(read, margin time.Duration) (restore func()) {
	r, m := readTimeout, writeMargin
	readTimeout, writeMargin = read, margin
	return func() { readTimeout, writeMargin = r, m }
}

// StreamWriteTimeout is how long a live stream's write may wait for its reader.
const StreamWriteTimeout = streamWriteTimeout
