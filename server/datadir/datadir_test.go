package datadir

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadTokenSecret(t *testing.T) {
	log := slog.New(slog.DiscardHandler)

	t.Run("OK", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		s1, err := LoadTokenSecret(dir, nil, log)
		require.NoError(t, err)
		assert.Len(t, s1, 64, "32 random bytes, hex-encoded")

		fi, err := os.Stat(filepath.Join(dir, SecretFile))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

		s2, err := LoadTokenSecret(dir, nil, log)
		require.NoError(t, err)
		assert.Equal(t, s1, s2, "the secret is created once and then reused")

		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "no temp file is left behind")
	})

	t.Run("Env", func(t *testing.T) {
		dir := t.TempDir()
		s, err := LoadTokenSecret(dir, []byte(strings.Repeat("e", 32)), log)
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("e", 32), string(s))
		assert.NoFileExists(t, filepath.Join(dir, SecretFile), "an env secret writes no file")
	})

	t.Run("ErrShortFile", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, SecretFile), []byte("short\n"), 0o600))
		_, err := LoadTokenSecret(dir, nil, log)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "it must be at least 32")
	})
}
