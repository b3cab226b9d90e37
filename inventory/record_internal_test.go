package inventory

import "testing"

// INSERT ... RETURNING is MariaDB's from 10.5 on; MySQL has none.
func TestInsertReturnsOn(t *testing.T) {
	for version, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1":      true,
		"10.5.0-MariaDB":                  true,
		"11.4.2-MariaDB-log":              true,
		"10.4.32-MariaDB-1:10.4.32+maria": false,
		"5.5.5-10.11.6-MariaDB":           false, // a proxy's prefix: not read as 10.11, so one statement per order
		"8.0.36":                          false,
		"8.4.0-commercial":                false,
		"":                                false,
	} {
		if got := insertReturnsOn(version); got != want {
			t.Errorf("insertReturnsOn(%q) = %v, want %v", version, got, want)
		}
	}
}
