package tcpproxy

import (
	"net"
	"time"
)

// pipe writes one direction of a connection: each chunk goes out the link's delay after it was
// read, in order, and the chunks read meanwhile are on their way at the same time, as on a long
// route: a slow link adds latency, never a cap on throughput. A Stall holds the writes back.
type pipe struct {
	p      *Proxy
	to     net.Conn
	pass   func() (write, goOn bool) // nil, or whether a chunk due now is written, and the pipe goes on
	chunks chan chunk
	done   chan struct{} // closed when the pipe stopped: closed and drained, or broken
}

type chunk struct {
	data    []byte
	due     time.Time
	written chan struct{} // a flush marker (data nil): closed when the chunks before are written
}

func (p *Proxy) newPipe(to net.Conn, pass func() (write, goOn bool)) *pipe {
	q := &pipe{p: p, to: to, pass: pass, chunks: make(chan chunk, 256), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *pipe) run() {
	defer close(q.done)
	for c := range q.chunks {
		if c.written != nil {
			close(c.written)
			continue
		}
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		q.p.waitFlow()
		write, goOn := true, true
		if q.pass != nil {
			write, goOn = q.pass()
		}
		if !goOn {
			return
		}
		if write {
			if _, err := q.to.Write(c.data); err != nil {
				return
			}
		}
	}
}

// send queues data (which the pipe then owns) to be written the link's delay from now; false
// when the pipe has stopped.
func (q *pipe) send(data []byte) bool {
	select {
	case q.chunks <- chunk{data: data, due: time.Now().Add(time.Duration(q.p.delay.Load()))}:
		return true
	case <-q.done:
		return false
	}
}

// flush waits until every chunk sent before is written; false when the pipe stopped first.
func (q *pipe) flush() bool {
	written := make(chan struct{})
	select {
	case q.chunks <- chunk{written: written}:
	case <-q.done:
		return false
	}
	select {
	case <-written:
		return true
	case <-q.done:
		return false
	}
}

// close takes no more chunks and waits until those queued are written or the pipe stopped.
func (q *pipe) close() {
	close(q.chunks)
	<-q.done
}
