package readme

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A runnable block is a ```go fence holding a `package main` that ends
// with a comment of the form
//
//	// Prints:
//	// first line
//	// second line
//
// The test checks that the block is gofmt'd and that `go run` prints
// exactly those lines.
var fence = regexp.MustCompile("(?s)```go\n(.*?)```")

func TestReadmeQuickStarts(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i, m := range fence.FindAllSubmatch(readme, -1) {
		src := m[1]
		if !bytes.HasPrefix(src, []byte("package main\n")) {
			continue
		}
		want, ok := printed(string(src))
		if !ok {
			continue
		}
		ran++
		t.Run(firstImport(string(src)), func(t *testing.T) {
			if formatted, err := format.Source(src); err != nil {
				t.Fatalf("block %d does not parse: %v", i, err)
			} else if !bytes.Equal(formatted, src) {
				t.Errorf("block %d is not gofmt'd; gofmt gives:\n%s", i, formatted)
			}
			// go run needs the file inside the module for its imports.
			dir, err := os.MkdirTemp(".", "run-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			file := filepath.Join(dir, "main.go")
			if err := os.WriteFile(file, src, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "run", "./"+dir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go run: %v\n%s", err, stderr.Bytes())
			}
			if stderr.Len() > 0 {
				t.Errorf("the quick start wrote to standard error:\n%s", stderr.Bytes())
			}
			if got := strings.TrimRight(string(out), "\n"); got != want {
				t.Errorf("block %d prints\n%s\nbut its comment says\n%s", i, got, want)
			}
		})
	}
	if ran < 2 {
		t.Fatalf("found %d runnable quick starts in README.md, want at least 2 (broadcast, events)", ran)
	}
}

// printed returns the lines of the block's trailing "// Prints:" comment.
func printed(src string) (string, bool) {
	_, after, ok := strings.Cut(src, "// Prints:\n")
	if !ok {
		return "", false
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(after, "\n"), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "//")
		lines = append(lines, strings.TrimPrefix(l, " "))
	}
	return strings.Join(lines, "\n"), true
}

func firstImport(src string) string {
	m := regexp.MustCompile(`"github.com/heraldgo/herald/([a-z/]+)"`).FindStringSubmatch(src)
	if m == nil {
		return "main"
	}
	return m[1]
}

// TestDemoIsQuiet holds `make demo` to the library's promise of quiet: the
// demo's routine work (repeats counted, an aggregate, spam decisions)
// writes nothing to standard error.
func TestDemoIsQuiet(t *testing.T) {
	cmd := exec.Command("go", "run", "../../examples/quickstart")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run ./examples/quickstart: %v\n%s", err, stderr.Bytes())
	}
	if len(out) == 0 {
		t.Error("the demo printed nothing on standard output")
	}
	if stderr.Len() > 0 {
		t.Errorf("the demo wrote to standard error:\n%s", stderr.Bytes())
	}
}
