// Command releasecheck builds a file module proxy (GOPROXY=file://DIR) of
// herald's library modules as a release would publish them: each module
// listed in .ci/modules, zipped from its directory with golang.org/x/mod/zip
// at the given version. It fails when a module's zip holds more than the
// bound that .ci/modules gives it (docs/releasing.md says why).
//
//	go run . -repo DIR -version v0.1.0 -out PROXYDIR [-only MODULEDIR]
//
// With -only it adds one module (its directory as in .ci/modules) to the
// proxy, so that a release can publish the root first and the nested
// modules after their go.sum names the root's sums.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", "", "the repository (a clone at the release commit)")
	version := flag.String("version", "", "the version to publish every module at")
	out := flag.String("out", "", "the proxy directory to write")
	only := flag.String("only", "", "publish only the module in this directory (as in .ci/modules)")
	flag.Parse()
	if err := run(*repo, *version, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
}

// entry is a line of .ci/modules: directory, module path, most bytes in its zip.
type entry struct {
	dir, path string
	max       int64
}

func modules(repo string) ([]entry, error) {
	f, err := os.Open(filepath.Join(repo, ".ci", "modules"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var es []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			return nil, fmt.Errorf(".ci/modules: want \"dir module max-zip-bytes\", got %q", line)
		}
		max, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf(".ci/modules: %q: %v", line, err)
		}
		es = append(es, entry{fs[0], fs[1], max})
	}
	return es, sc.Err()
}

func run(repo, version, out, only string) error {
	es, err := modules(repo)
	if err != nil {
		return err
	}
	found := false
	for _, e := range es {
		if only != "" && e.dir != only {
			continue
		}
		found = true
		mv := module.Version{Path: e.path, Version: version}
		esc, err := module.EscapePath(e.path)
		if err != nil {
			return err
		}
		d := filepath.Join(out, esc, "@v")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		dir := filepath.Join(repo, e.dir)
		files, err := modzip.CheckDir(dir)
		if err != nil {
			return fmt.Errorf("%s: %v", e.path, err)
		}
		zp := filepath.Join(d, version+".zip")
		z, err := os.Create(zp)
		if err != nil {
			return err
		}
		if err := modzip.CreateFromDir(z, mv, dir); err != nil {
			z.Close()
			return fmt.Errorf("%s: %v", e.path, err)
		}
		if err := z.Close(); err != nil {
			return err
		}
		st, err := os.Stat(zp)
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s: %d files, zip %d bytes (bound %d)\n", e.path, version, len(files.Valid), st.Size(), e.max)
		if st.Size() > e.max {
			return fmt.Errorf("%s: zip is %d bytes, more than the %d that .ci/modules allows (see docs/releasing.md, \"What a module's zip holds\")", e.path, st.Size(), e.max)
		}
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, version+".mod"), gomod, 0o644); err != nil {
			return err
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, time.Now().UTC()})
		if err := os.WriteFile(filepath.Join(d, version+".info"), info, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "list"), []byte(version+"\n"), 0o644); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("no module in directory %q in .ci/modules", only)
	}
	return nil
}
