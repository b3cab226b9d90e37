package lincheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// notSent reports whether the request failed before a connection was open, so the replica
// never saw it.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// send sends one request; raw is the answer's body. A transport error (a timeout, a cut or
// refused connection) comes back as err with status 0.
func (r *Recorder) send(ctx context.Context, method, u, body string, admin bool, hdr map[string]string) (status int, raw []byte, err error) {
	status, raw, _, err = r.sendFor(ctx, method, u, body, admin, hdr)
	return status, raw, err
}

// sendFor is send, with the answer's header.
func (r *Recorder) sendFor(ctx context.Context, method, u, body string, admin bool, hdr map[string]string) (status int, raw []byte, header http.Header, err error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("lincheck: request %s %s: %w", method, u, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// net/http resends a request that has an Idempotency-Key when its reused connection dies
	// before the answer, if it can rewind the body. The resend's dial error would then say "not
	// sent" of a request the replica had received and may have applied (a replica killed
	// mid-purchase): the history would lose a sale. Without GetBody a request is resent only
	// if none of its body was written, which is what notSent assumes.
	req.GetBody = nil
	resp, err := r.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, raw, resp.Header, fmt.Errorf("lincheck: read the answer of %s %s: %w", method, u, err)
	}
	return resp.StatusCode, raw, resp.Header, nil
}
