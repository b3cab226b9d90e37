package order

import "testing"

// ZKSTOCK_LIE names the planted lies; a name it does not know is an error, never ignored.
func TestParseLies(t *testing.T) {
	l, err := parseLies(LieSoldOutCache + ", " + LieUnconfirmedNotSold + "," + LieSwitchNoDrain + "," + LieUnsafeFlush + "," + LieStaleReads)
	if err != nil || !l.soldOutCache || !l.unconfirmedNotSold || !l.switchNoDrain || !l.unsafeFlush || !l.staleReads {
		t.Errorf("every lie: %+v, %v", l, err)
	}
	if l, err := parseLies(""); err != nil || l != (plantedLies{}) {
		t.Errorf("none: %+v, %v", l, err)
	}
	if _, err := parseLies("soldout"); err == nil {
		t.Error("an unknown lie was accepted")
	}
}

// A build without the zkstock_lies tag (every build but the nemesis's controls) plants no lie,
// whatever ZKSTOCK_LIE says: the variable is never read.
func TestNoLieWithoutTheTag(t *testing.T) {
	if plantedTag {
		t.Skip("built with zkstock_lies")
	}
	if planted != (plantedLies{}) {
		t.Errorf("a build without the tag plants %+v", planted)
	}
}
