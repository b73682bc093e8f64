package main

import (
	"runtime/debug"
	"testing"
)

// --version prints the module version when there is one, else "devel" with the commit and its
// date, else says that the build has neither.
func TestDescribeBuild(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "d0b40ac2bab4a9e6bc9b4dd0db521aa162c2473d"},
		{Key: "vcs.time", Value: "2026-11-28T15:18:26Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.4.0", nil, "locker v1.4.0 (go1.26.8)"},
		{"v0.0.0-20261128151826-d0b40ac2bab4+dirty", vcs, "locker v0.0.0-20261128151826-d0b40ac2bab4+dirty (go1.26.8, commit d0b40ac2bab4 of 2026-11-28T15:18:26Z, modified)"},
		{"(devel)", vcs, "locker devel (go1.26.8, commit d0b40ac2bab4 of 2026-11-28T15:18:26Z, modified)"},
		{"(devel)", nil, "locker devel (go1.26.8, no module version nor VCS revision: built with -buildvcs=false, or outside a git checkout)"},
		{"", vcs[:1], "locker devel (go1.26.8, commit d0b40ac2bab4)"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := describeBuild(bi); got != tc.want {
			t.Errorf("version %q with %d settings:\n got %q\nwant %q", tc.version, len(tc.settings), got, tc.want)
		}
	}
}
