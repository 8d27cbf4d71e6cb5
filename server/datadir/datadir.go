// Package datadir lays out a server's data directory: the embedded store's
// directory, and the token secret beside it, which it loads or creates.
package datadir

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// EmbeddedDir is the embedded store's directory inside the data directory;
// the token secret sits beside it.
const EmbeddedDir = "embedded"

// SecretFile is the name of the token secret inside the data directory.
const SecretFile = "token-secret"

// EnvTokenSecret holds the token signing secret. It has no flag on purpose:
// command lines are visible to every user of the machine (ps, /proc).
const EnvTokenSecret = "HERALD_TOKEN_SECRET"

// MinSecretLen is the shortest accepted token secret: 256 bits, the key size
// RFC 7518 requires for HMAC-SHA256 signed tokens.
const MinSecretLen = 32

// LoadTokenSecret returns the secret that signs bearer tokens: fromEnv if
// set (the configuration has checked its length), else the content of
// <dataDir>/token-secret, which is created with 32 random bytes on first
// start. Keeping it next to the data means tokens survive a restart.
//
// The file holds the bytes hex-encoded, and the secret is that text, so an
// operator can move it to HERALD_TOKEN_SECRET unchanged and keep every
// issued token valid.
func LoadTokenSecret(dataDir string, fromEnv []byte, log *slog.Logger) ([]byte, error) {
	if fromEnv != nil {
		log.Info("token secret from environment", "var", EnvTokenSecret)
		return fromEnv, nil
	}
	path := filepath.Join(dataDir, SecretFile)
	secret, err := ReadSecretFile(path)
	switch {
	case err == nil:
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("token secret file is readable by other users; chmod 600 it", "path", path, "mode", fi.Mode().Perm().String())
		}
		log.Info("token secret from file", "path", path)
		return secret, nil
	case errors.Is(err, fs.ErrNotExist):
		secret, err := createSecretFile(dataDir, path)
		if err != nil {
			return nil, err
		}
		log.Info("token secret created", "path", path)
		return secret, nil
	default:
		return nil, err
	}
}

// ReadSecretFile reads the secret kept at path. A missing file is
// fs.ErrNotExist; a secret shorter than MinSecretLen is an error.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	secret := bytes.TrimSpace(b)
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("token secret %s is %d bytes; it must be at least %d (delete it to make a new one, which logs everyone out)", path, len(secret), MinSecretLen)
	}
	return secret, nil
}

// createSecretFile writes a new random secret to path atomically: a temp
// file in the same directory (created 0600), synced, then renamed, so a
// crash never leaves a partial secret behind.
func createSecretFile(dir, path string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate token secret: %w", err)
	}
	secret := []byte(hex.EncodeToString(raw))

	tmp, err := os.CreateTemp(dir, SecretFile+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create token secret: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create token secret: %w", err)
	}
	if _, err := tmp.Write(append(secret, '\n')); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write token secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write token secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write token secret: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("install token secret: %w", err)
	}
	// Sync the directory so the rename itself survives a power loss.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return secret, nil
}
