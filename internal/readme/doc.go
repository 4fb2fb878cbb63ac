// Package readme holds the test that keeps the README's quick starts true:
// every Go program in README.md that names the output it prints is run, and
// its output compared.
package readme
