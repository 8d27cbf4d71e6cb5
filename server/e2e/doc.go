// Package e2e holds the server's slow end-to-end tests, and nothing else:
// the binary, built by the tests, run through the product tour, killed with
// SIGKILL during fan-out and inbox rebuilds and restarted, and the whole
// server in process under the requests of an attacker. They live apart so
// that the tests of each package, the server's wiring included, stay fast;
// go test ./... runs them all.
package e2e
