package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad flags print the usage and exit 2, without sending anything.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"-modes", ""}, {"-replicas", " , "}, {"-duration", "0s"}, {"-clients", "0"}, {"extra"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(errOut.String(), "usage: lincheck") || out.Len() != 0 {
			t.Errorf("%v: stdout %q, stderr %q", args, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-viz") {
		t.Errorf("-h: exit %d, %q", code, errOut.String())
	}
}
