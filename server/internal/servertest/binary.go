package servertest

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// BuildHerald builds the server binary, with the race detector when the
// test itself has it, so that -race also covers the running server.
func BuildHerald(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool is needed to build the server")
	bin := filepath.Join(t.TempDir(), "herald")
	args := []string{"build", "-o", bin}
	if RaceEnabled() {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool, append(args, "herald/server")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// RaceEnabled reports whether this test binary was built with -race.
func RaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
