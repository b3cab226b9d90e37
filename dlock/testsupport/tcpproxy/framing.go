package tcpproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
)

// framing reads one whole request (header included) from the client's byte stream.
type framing func(r io.Reader) ([]byte, error)

var errFrameTooLarge = errors.New("tcpproxy: frame too large")

// zooKeeperFrames: a 4-byte big-endian length, then the body. The first frame is the session
// handshake; every later one starts with xid and opcode.
func zooKeeperFrames(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 16<<20 {
		return nil, errFrameTooLarge
	}
	frame := make([]byte, 4+int(n))
	copy(frame, hdr[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// rawChunks hands over whatever bytes one read returns: no protocol is assumed.
func rawChunks(r io.Reader) ([]byte, error) {
	buf := make([]byte, 32<<10)
	n, err := r.Read(buf)
	if n > 0 {
		return buf[:n], nil // an error with the bytes comes again on the next read
	}
	return nil, err
}

// zooKeeperOpcode matches the requests after a connection's handshake (its first frame, which has
// no opcode: its bytes there are the last zxid seen) by opcode.
func zooKeeperOpcode(match func(opcode int32) bool) func(frame []byte, index int) bool {
	return func(frame []byte, index int) bool {
		if index == 0 || len(frame) < 12 {
			return false
		}
		return match(int32(binary.BigEndian.Uint32(frame[8:12])))
	}
}

// mySQLFrames: a 3-byte little-endian payload length and a sequence byte, then the payload.
func mySQLFrames(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	frame := make([]byte, 4+n)
	copy(frame, hdr[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

const comQuery = 0x03

// mySQLQuery matches text queries (COM_QUERY), such as the COMMIT a driver sends, after the
// connection's first frame (the client's handshake response).
func mySQLQuery(match func(query string) bool) func(frame []byte, index int) bool {
	return func(frame []byte, index int) bool {
		if index == 0 || len(frame) < 5 || frame[4] != comQuery {
			return false
		}
		return match(strings.TrimSpace(string(frame[5:])))
	}
}
